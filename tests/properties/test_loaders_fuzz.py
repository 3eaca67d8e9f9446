"""The checkpoint and corpus-store loaders on damaged files (byte flips, truncation, files
swapped, vocabulary lines shuffled): a run or store either loads (a checkpoint then holds
exactly the state that was saved) or is refused with one of topictk's own errors, never
another exception. Round trips: state -> checkpoint -> state, token lists -> store -> arrays."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.fixtures import write_token_store
from tests.integration._cli import EXAMPLE, ok
from tests.properties._props import Blob, damaged, quick_and_long
from topictk.corpus.store import CorpusStore
from topictk.errors import TopictkError
from topictk.evaluation.run import LoadedRun
from topictk.inference import base as inference_base
from topictk.rundir import checkpoint as ckpt

RUNS = {
    "gibbs": {"inference": {"algorithm": "gibbs", "iterations": 6, "burn_in": 3, "thin": 1}},
    "vb": {"inference": {"algorithm": "vb", "iterations": 6}},
    "sgrld": {"inference": {"algorithm": "sgrld", "iterations": 6, "burn_in": 3, "thin": 1,
                            "batch_size": 32, "sweeps": 4}},
    "tlasgr": {"model": {"family": "dlda", "layers": [6, 3]},
               "inference": {"algorithm": "tlasgr", "iterations": 6, "burn_in": 3,
                             "batch_size": 32, "local_burn_in": 4, "local_samples": 2,
                             "point_perplexity": {"iterations": 4, "last": 2, "thin": 1,
                                                  "every": 6}}},
}


def _prepare(directory: Path) -> Path:
    store = directory / "store"
    ok("prepare", EXAMPLE, "--out", store)
    return store


def _train(directory: Path, store: Path, name: str) -> Path:
    spec = RUNS[name]
    run = directory / name
    data = {"corpus": str(store), "output": str(run),
            "model": spec.get("model", {"topics": 5, "alpha": 0.1, "beta": 0.01}),
            "inference": spec["inference"],
            "training": {"seed": 2, "eval_every": 3, "checkpoint_every": 3,
                         "keep_checkpoints": 5},
            "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5}}
    config = directory / f"{name}.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    ok("train", "--config", config, "-q")
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("loaders")
    store = _prepare(directory)
    return {name: _train(directory, store, name) for name in RUNS}


def _state_arrays(loaded: LoadedRun) -> dict[str, np.ndarray]:
    return loaded.driver.state_to_arrays(loaded.state)[1]


# ---------------------------------------------------------------- checkpoints


def _checkpoint_property(runs):
    originals = {}
    for name, run in runs.items():
        path = ckpt.checkpoint_path(run / "checkpoints", 3)
        originals[name] = (path, path.read_bytes(), _state_arrays(LoadedRun(run, 3)))
    other = {name: runs[name] / "model.npz" for name in runs}

    @st.composite
    def case(draw):
        name = draw(st.sampled_from(sorted(runs)))
        data = originals[name][1]
        kind = draw(st.sampled_from(["damage", "damage", "damage", "other"]))
        if kind == "other":     # another run's model in place of the checkpoint
            source = draw(st.sampled_from(sorted(other)))
            replacement = Blob(other[source].read_bytes())
            replacement.how = f"the model of {source}"
        else:
            replacement = draw(damaged(data))
        return name, replacement

    def check(example):
        name, replacement = example
        path, data, expected = originals[name]
        path.write_bytes(replacement)
        try:
            loaded = LoadedRun(runs[name], 3)
        except TopictkError:
            return
        finally:
            path.write_bytes(data)
        got = _state_arrays(loaded)
        if replacement != data and set(got) != set(expected):
            return          # another run's model, of another algorithm's arrays: not ours
        assert set(got) == set(expected)
        for key, value in expected.items():
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
            assert got[key].tobytes() == value.tobytes(), f"{name}: {key} loaded changed"

    return case(), check


def test_damaged_checkpoints_load_exactly_or_are_refused(runs):
    strategy, check = _checkpoint_property(runs)
    given(strategy)(check)()


@pytest.mark.slow
def test_damaged_checkpoints_load_exactly_or_are_refused_long(runs):
    from hypothesis import settings

    from tests.properties.conftest import LONG_EXAMPLES

    strategy, check = _checkpoint_property(runs)
    settings(max_examples=LONG_EXAMPLES)(given(strategy)(check))()


def test_state_checkpoint_state_round_trip(runs, tmp_path):
    for name, run in runs.items():
        loaded = LoadedRun(run, 3)
        header, arrays = loaded.driver.state_to_arrays(loaded.state)
        path = tmp_path / f"{name}.npz"
        ckpt.save_arrays(path, {"state": header}, arrays)
        got_header, got_arrays = ckpt.load_arrays(path)
        state = loaded.driver.state_from_arrays(got_header["state"], got_arrays)
        again_header, again = loaded.driver.state_to_arrays(state)
        assert again_header == header
        assert set(again) == set(arrays)
        for key in arrays:
            assert again[key].tobytes() == np.asarray(arrays[key]).tobytes(), (name, key)


_ARRAY = hnp.arrays(
    dtype=st.sampled_from([np.int32, np.int64, np.float64, np.float32, np.uint8, np.bool_]),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
    elements=None)
_HEADER = st.dictionaries(st.text(max_size=8).filter(lambda k: k not in ("format",
                                                                        "format_version")),
                          st.one_of(
    st.integers(-2**63, 2**63 - 1), st.text(max_size=10), st.booleans(), st.none(),
    st.floats(allow_nan=False, allow_infinity=False)), max_size=4)


def check_arrays_round_trip(example) -> None:
    header, arrays = example
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.npz"
        ckpt.save_arrays(path, header, arrays)
        got_header, got = ckpt.load_arrays(path)
    assert {k: got_header[k] for k in header} == header
    assert set(got) == set(arrays)
    for key, value in arrays.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape
        assert got[key].tobytes() == value.tobytes()


test_arrays_checkpoint_round_trip, test_arrays_checkpoint_round_trip_long = quick_and_long(
    check_arrays_round_trip,
    st.tuples(_HEADER, st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), _ARRAY,
                                       max_size=4)))

# ---------------------------------------------------------------- corpus stores

_STORE_FILES = ["manifest.json", "vocab.txt", "train_words.npy", "train_doc_ptr.npy",
                "train_indptr.npy", "train_indices.npy", "train_counts.npy",
                "test_obs_doc_ptr.npy", "test_obs_words.npy", "test_obs_indices.npy",
                "test_held_indptr.npy", "test_held_indices.npy", "test_held_counts.npy",
                "train_ids.txt"]


def use_store(path: Path) -> None:
    """What commands do with a store: open it, read every array and the vocabulary, build
    the test set."""
    store = CorpusStore.open(path)
    for part in (store.train(), store.test_observed(), store.test_heldout()):
        for array in (part.indptr, part.indices, part.counts, part.doc_ptr, part.words):
            if array is not None:
                np.asarray(array).sum()
    assert isinstance(store.vocab, list)
    store.metadata("train")
    inference_base.EvaluationSet.from_store(store)


def _named(data: bytes, how: str) -> Blob:
    blob = Blob(data)
    blob.how = how
    return blob


def _store_property(store: Path):
    files = {name: (store / name).read_bytes() for name in _STORE_FILES}

    @st.composite
    def case(draw):
        kind = draw(st.sampled_from(["damage", "damage", "swap", "delete", "shuffle_vocab"]))
        name = draw(st.sampled_from(_STORE_FILES))
        if kind == "damage":
            return {name: draw(damaged(files[name]))}
        if kind == "swap":
            other = draw(st.sampled_from(_STORE_FILES))
            return {name: _named(files[other], f"was {other}"),
                    other: _named(files[name], f"was {name}")}
        if kind == "delete":
            return {name: None}
        words = files["vocab.txt"].decode().splitlines()
        shuffled = ("\n".join(draw(st.permutations(words))) + "\n").encode()
        return {"vocab.txt": _named(shuffled, "shuffled")}

    def check(changes):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "store"
            shutil.copytree(store, copy)
            for name, data in changes.items():
                if data is None:
                    (copy / name).unlink()
                else:
                    (copy / name).write_bytes(data)
            try:
                use_store(copy)
            except TopictkError:
                return

    return case(), check


@pytest.fixture(scope="module")
def example_copy(tmp_path_factory):
    return _prepare(tmp_path_factory.mktemp("store-fuzz"))


def test_damaged_stores_open_or_are_refused(example_copy):
    strategy, check = _store_property(example_copy)
    given(strategy)(check)()


@pytest.mark.slow
def test_damaged_stores_open_or_are_refused_long(example_copy):
    from hypothesis import settings

    from tests.properties.conftest import LONG_EXAMPLES

    strategy, check = _store_property(example_copy)
    settings(max_examples=LONG_EXAMPLES)(given(strategy)(check))()


_DOCS = st.lists(st.lists(st.integers(0, 7), max_size=12), max_size=6)


def check_store_round_trip(example) -> None:
    train, test = example
    with tempfile.TemporaryDirectory() as tmp:
        train_arrays = [np.asarray(d, np.int32) for d in train]
        test_arrays = [np.asarray(d, np.int32) for d in test]
        held = [np.asarray(d[::2], np.int32) for d in test]
        write_token_store(Path(tmp) / "s", train_arrays, 8, test_observed=test_arrays,
                          test_heldout=held)
        store = CorpusStore.open(Path(tmp) / "s")
        got = store.train()
        assert np.array_equal(got.doc_ptr, np.cumsum([0] + [len(d) for d in train]))
        assert got.words.tolist() == [w for d in train for w in d]
        for d, doc in enumerate(train):
            row = slice(got.indptr[d], got.indptr[d + 1])
            counts = dict(zip(got.indices[row].tolist(), got.counts[row].tolist(), strict=True))
            assert counts == {w: doc.count(w) for w in set(doc)}
        obs = store.test_observed()
        assert obs.words.tolist() == [w for d in test for w in d]
        assert store.test_heldout().n_tokens == sum(len(h) for h in held)
        assert store.vocab == [f"w{v:04d}" for v in range(8)]


test_store_round_trip, test_store_round_trip_long = quick_and_long(
    check_store_round_trip, st.tuples(_DOCS, _DOCS), quick_examples=100)
