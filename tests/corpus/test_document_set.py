"""DocumentSet keeps tokens, held-out parts, ids and metadata in lockstep."""
import numpy as np

from topictk.corpus.prepare import DocumentSet


def _ints(*values):
    return np.array(values, dtype=np.int32)


def test_take_keeps_every_field_in_the_order_asked():
    docs = DocumentSet([_ints(0), _ints(1, 2), _ints()], ["a", "b", "c"],
                       meta=[{"x": 1}, {"x": 2}, {"x": 3}],
                       held=[_ints(), _ints(3), _ints(4)])
    taken = docs.take(np.array([2, 0]))
    assert taken.ids == ["c", "a"]
    assert taken.meta == [{"x": 3}, {"x": 1}]
    assert [t.tolist() for t in taken.tokens] == [[], [0]]
    assert [h.tolist() for h in taken.held] == [[4], []]


def test_take_without_metadata_or_held_parts():
    taken = DocumentSet([_ints(0), _ints(1)], ["a", "b"]).take([1])
    assert taken.ids == ["b"] and taken.meta is None and taken.held is None


def test_keep_nonempty_counts_both_parts():
    docs = DocumentSet([_ints(), _ints(), _ints(5)], ["a", "b", "c"],
                       held=[_ints(), _ints(1), _ints()])
    assert docs.keep_nonempty().ids == ["b", "c"]
    assert DocumentSet([_ints(), _ints(2)], ["a", "b"]).keep_nonempty().ids == ["b"]


def test_remap_drops_words_outside_the_vocabulary():
    docs = DocumentSet([_ints(0, 3, 1, 3)], ["a"], held=[_ints(2, 3)])
    mapped = docs.remap(np.array([1, 3]), n_types=4)   # type 1 -> 0, type 3 -> 1
    assert mapped.tokens[0].tolist() == [1, 0, 1]
    assert mapped.held[0].tolist() == [1]
    assert mapped.tokens[0].dtype == np.int32
    assert docs.n_tokens() == 6 and mapped.n_tokens() == 4
