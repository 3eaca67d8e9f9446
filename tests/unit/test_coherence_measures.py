"""The coherence measures of gensim's CoherenceModel (c_v, c_npmi, c_uci, u_mass;
docs/evaluate.md): the window-counting kernel against its NumPy twin, every measure against
values worked out by hand on a tiny corpus, and no NaN for pairs never seen together, words
the texts lack, and a reference corpus with another vocabulary."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from tests.fixtures import write_token_store
from tests.reference.coherence import count_windows as twin_count_windows
from topictk.cli import cli
from topictk.corpus.store import CorpusStore, Documents, tokens_to_ptr
from topictk.evaluation._coherence import count_windows
from topictk.evaluation.coherence import (
    EPSILON,
    GENSIM_MEASURES,
    gensim_coherence,
    parse_measures,
    window_counts,
)
from topictk.evaluation.run import evaluate_run

EPS = 1e-12          # gensim's epsilon, written out again here


def texts_of(docs: list[list[str]], vocab: list[str]) -> Documents:
    index = {w: i for i, w in enumerate(vocab)}
    ptr, words = tokens_to_ptr([np.array([index[w] for w in d], np.int32) for d in docs])
    return Documents(ptr, words, None, None, None)


# ------------------------------------------------------------------------- kernel and twin
def _kernel_counts(ptr, words, local, window, gensim_edge, U, pairs):
    """The kernel's counts as a (U, U) matrix over ``pairs`` (ordered pairs (a, b), a != b,
    both orders present)."""
    keys = np.unique([a * U + b for a, b in pairs]).astype(np.int64)
    adj_ptr = np.zeros(U + 1, np.int64)
    np.cumsum(np.bincount(keys // U, minlength=U), out=adj_ptr[1:])
    adj = (keys % U).astype(np.int32)
    occ = np.zeros(U, np.int64)
    co = np.zeros(keys.size, np.int64)
    n = count_windows(ptr, words, local, window, gensim_edge, adj_ptr, adj, occ, co, 0,
                      ptr.size - 1)
    matrix = np.zeros((U, U), np.int64)
    for j, key in enumerate(keys):
        matrix[key // U, key % U] += co[j]
    return n, occ, matrix + matrix.T


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("window", [0, 1, 2, 5, 10, 110])
@pytest.mark.parametrize("gensim_edge", [True, False])
def test_kernel_equals_the_numpy_twin(seed, window, gensim_edge):
    rng = np.random.default_rng(seed)
    V, U = 15, 7
    docs = [rng.integers(0, V, rng.integers(0, 40)).astype(np.int32) for _ in range(30)]
    docs[0] = np.zeros(0, np.int32)                         # an empty text is one window
    ptr, words = tokens_to_ptr(docs)
    local = np.full(V, -1, np.int32)
    local[rng.permutation(V)[:U]] = np.arange(U, dtype=np.int32)
    pairs = [(a, b) for a in range(U) for b in range(U) if a != b]
    n, occ, co = _kernel_counts(ptr, words, local, window, gensim_edge, U, pairs)
    n_ref, occ_ref, co_ref = twin_count_windows(ptr, words, local, window, gensim_edge, U)
    assert n == n_ref
    np.testing.assert_array_equal(occ, occ_ref)
    np.testing.assert_array_equal(co, co_ref)


def test_kernel_counts_only_the_pairs_asked_for_and_in_chunks():
    """Pairs of words that share no topic are not counted; counting the texts in two calls
    adds up to one call."""
    rng = np.random.default_rng(7)
    docs = [rng.integers(0, 6, rng.integers(0, 30)).astype(np.int32) for _ in range(12)]
    ptr, words = tokens_to_ptr(docs)
    top = np.array([[0, 1, 2], [2, 3, -1]])
    n, counts = window_counts(ptr, words, top, 6, 4)
    local = np.array([0, 1, 2, 3, -1, -1], np.int32)
    n_ref, occ, co = twin_count_windows(ptr, words, local, 4, True, 4)
    assert n == n_ref
    np.testing.assert_array_equal(counts[0], [[occ[0], co[0, 1], co[0, 2]],
                                              [co[1, 0], occ[1], co[1, 2]],
                                              [co[2, 0], co[2, 1], occ[2]]])
    np.testing.assert_array_equal(counts[1], [[occ[2], co[2, 3], 0], [co[3, 2], occ[3], 0],
                                              [0, 0, 0]])
    adj_ptr, adj = np.array([0, 1, 2, 2, 2], np.int64), np.array([1, 0], np.int32)
    whole = [np.zeros(4, np.int64), np.zeros(2, np.int64)]
    parts = [np.zeros(4, np.int64), np.zeros(2, np.int64)]
    a = count_windows(ptr, words, local, 4, True, adj_ptr, adj, *whole, 0, 12)
    b = count_windows(ptr, words, local, 4, True, adj_ptr, adj, *parts, 0, 5) + \
        count_windows(ptr, words, local, 4, True, adj_ptr, adj, *parts, 5, 12)
    assert a == b
    np.testing.assert_array_equal(whole[0], parts[0])
    np.testing.assert_array_equal(whole[1], parts[1])


def test_kernel_refuses_bad_ranges():
    ptr, words = tokens_to_ptr([np.array([0, 1], np.int32)])
    local = np.array([0, 1], np.int32)
    adj_ptr, adj = np.array([0, 1, 2], np.int64), np.array([1, 0], np.int32)
    occ, co = np.zeros(2, np.int64), np.zeros(2, np.int64)
    with pytest.raises(ValueError):
        count_windows(ptr, words, local, 3, True, adj_ptr, adj, occ, co, 0, 2)
    with pytest.raises(ValueError):
        count_windows(ptr, words, local, 3, True, adj_ptr, np.array([1, 5], np.int32), occ,
                      co, 0, 1)


def test_gensim_edge_marks_a_repeated_word_absent():
    """Text a b a c, windows of 3: [a b a], [b a c]. gensim marks a absent in the second
    window (the a at the left edge left), so a counts 1 window and (a, c) none; the plain
    boolean window counts a twice and (a, c) once."""
    vocab = ["a", "b", "c"]
    texts = texts_of([["a", "b", "a", "c"]], vocab)
    top = np.array([[0, 1, 2]])
    n, counts = window_counts(texts.doc_ptr, texts.words, top, 3, 3, gensim_edge=True)
    assert n == 2
    np.testing.assert_array_equal(counts[0], [[1, 1, 0], [1, 2, 1], [0, 1, 1]])
    n, counts = window_counts(texts.doc_ptr, texts.words, top, 3, 3, gensim_edge=False)
    np.testing.assert_array_equal(counts[0], [[2, 2, 1], [2, 2, 1], [1, 1, 1]])


# ----------------------------------------------------------------------- values by hand
# T1 = a b x x x x x x x x x c (12 tokens), T2 = a c, T3 = b c b, T4 = x; topic [a, b, c].
#
# Windows of 10 (c_npmi, c_uci): T1 has 3: {a, b}, {b}, {c}; T2, T3, T4 one each:
# {a, c}, {b, c}, {}. N = 6; a in 2, b in 3, c in 3; (a, b) 1, (a, c) 1, (b, c) 1.
# Windows of 110 (c_v) and documents (u_mass): every text is one. N = 4; a in 2, b in 2,
# c in 3; (a, b) 1, (a, c) 2, (b, c) 2.
HAND_DOCS = [["a", "b", *["x"] * 9, "c"], ["a", "c"], ["b", "c", "b"], ["x"]]
HAND_VOCAB = ["a", "b", "c", "x"]


def _pmi(joint, p1, p2):
    return math.log((joint + EPS) / (p1 * p2))


def _npmi(joint, p1, p2):
    return _pmi(joint, p1, p2) / -math.log(joint + EPS)


def hand_values() -> dict:
    # u_mass: each word given the words ranked above it, documents, N = 4
    u_mass = (math.log((1 / 4 + EPS) / (2 / 4))       # b given a
              + math.log((2 / 4 + EPS) / (2 / 4))     # c given a
              + math.log((2 / 4 + EPS) / (2 / 4))) / 3  # c given b
    # windows of 10, N = 6
    pmi = {"ab": _pmi(1 / 6, 2 / 6, 3 / 6), "ac": _pmi(1 / 6, 2 / 6, 3 / 6),
           "bc": _pmi(1 / 6, 3 / 6, 3 / 6)}
    c_uci = (pmi["ab"] + pmi["ac"] + pmi["bc"]) / 3          # = log(2/3) / 3
    npmi = {"ab": _npmi(1 / 6, 2 / 6, 3 / 6), "ac": _npmi(1 / 6, 2 / 6, 3 / 6),
            "bc": _npmi(1 / 6, 3 / 6, 3 / 6)}
    c_npmi = (npmi["ab"] + npmi["ac"] + npmi["bc"]) / 3     # = log(2/3) / log(6) / 3
    # c_v: windows of 110 (whole texts), N = 4; NPMI context vectors over (a, b, c)
    m = [[_npmi(2 / 4, 2 / 4, 2 / 4), _npmi(1 / 4, 2 / 4, 2 / 4), _npmi(2 / 4, 2 / 4, 3 / 4)],
         [_npmi(1 / 4, 2 / 4, 2 / 4), _npmi(2 / 4, 2 / 4, 2 / 4), _npmi(2 / 4, 2 / 4, 3 / 4)],
         [_npmi(2 / 4, 3 / 4, 2 / 4), _npmi(2 / 4, 3 / 4, 2 / 4), _npmi(3 / 4, 3 / 4, 3 / 4)]]
    whole = [m[0][j] + m[1][j] + m[2][j] for j in range(3)]
    norm = math.sqrt(sum(v * v for v in whole))
    cos = [sum(m[i][j] * whole[j] for j in range(3))
           / (math.sqrt(sum(v * v for v in m[i])) * norm) for i in range(3)]
    c_v = sum(cos) / 3
    return {"u_mass": u_mass, "c_uci": c_uci, "c_npmi": c_npmi, "c_v": c_v}


def test_hand_values_in_closed_form():
    """The worked values, without the epsilon: r = ln(4/3)/ln 2 is the NPMI of (a, c) and
    (b, c) in c_v's windows, 1 that of a word with itself, 0 that of (a, b)."""
    v = hand_values()
    assert v["u_mass"] == pytest.approx(math.log(0.5) / 3, abs=1e-9)
    assert v["c_uci"] == pytest.approx(math.log(2 / 3) / 3, abs=1e-9)
    assert v["c_npmi"] == pytest.approx(math.log(2 / 3) / math.log(6) / 3, abs=1e-9)
    r = math.log(4 / 3) / math.log(2)
    s = [1 + r, 1 + r, 1 + 2 * r]
    norm = math.sqrt(sum(x * x for x in s))
    cos_a = (s[0] + r * s[2]) / (math.sqrt(1 + r * r) * norm)
    cos_c = (r * s[0] + r * s[1] + s[2]) / (math.sqrt(1 + 2 * r * r) * norm)
    assert v["c_v"] == pytest.approx((2 * cos_a + cos_c) / 3, abs=1e-9)


@pytest.mark.parametrize("measure", GENSIM_MEASURES)
def test_each_measure_equals_the_hand_computed_value(measure):
    texts = texts_of(HAND_DOCS, HAND_VOCAB)
    found = gensim_coherence([["a", "b", "c"]], texts, HAND_VOCAB, [measure], progress=False)
    assert found["per_topic"][measure][0] == pytest.approx(hand_values()[measure], abs=1e-12)
    assert found["mean"][measure] == found["per_topic"][measure][0]
    assert found["windows"][measure] == {"u_mass": 4, "c_v": 4}.get(measure, 6)
    assert found["absent"] == {}


def test_the_epsilon_is_gensims():
    assert EPSILON == EPS


# ----------------------------------------------------------------------- never a NaN
def test_a_pair_never_seen_together_gives_gensims_epsilon_value():
    """a and x never share a window of 110 (a text): gensim's epsilon keeps the logarithm
    finite. Texts a a | x; topic [a, x]: N = 2, p(a) = p(x) = 1/2, joint 0."""
    vocab = ["a", "x"]
    texts = texts_of([["a", "a"], ["x"]], vocab)
    found = gensim_coherence([["a", "x"]], texts, vocab, progress=False)
    pmi = math.log(EPS / (1 / 2 * 1 / 2))
    npmi = pmi / -math.log(EPS)
    assert found["per_topic"]["c_uci"][0] == pytest.approx(pmi, rel=1e-12)
    assert found["per_topic"]["c_npmi"][0] == pytest.approx(npmi, rel=1e-12)
    assert found["per_topic"]["u_mass"][0] == pytest.approx(math.log(EPS / (1 / 2)), rel=1e-12)
    # c_v: NPMI vectors (1, npmi) and (npmi, 1) against their sum (1 + npmi, 1 + npmi)
    self_npmi = math.log((1 / 2 + EPS) / (1 / 4)) / -math.log(1 / 2 + EPS)
    cos = (self_npmi + npmi) * (self_npmi + npmi) / (
        math.sqrt(self_npmi ** 2 + npmi ** 2) * math.sqrt(2) * abs(self_npmi + npmi))
    assert found["per_topic"]["c_v"][0] == pytest.approx(cos, rel=1e-9)
    assert all(math.isfinite(v) for m in GENSIM_MEASURES for v in found["per_topic"][m])


def test_words_the_texts_lack_are_reported_and_left_out():
    """A word not in the vocabulary, or in it but never in the texts, leaves its topic (as
    gensim leaves out a word its dictionary lacks); a topic with fewer than two words left
    has no value (None), and the mean is over the others."""
    vocab = ["a", "b", "c", "x", "unused"]
    texts = texts_of(HAND_DOCS, vocab)
    topics = [["a", "nowhere", "b", "c", "unused"], ["nowhere", "unused"], ["a", "b", "c"]]
    found = gensim_coherence(topics, texts, vocab, progress=False)
    assert found["absent"] == {"nowhere": [0, 1], "unused": [0, 1]}
    for m in GENSIM_MEASURES:
        values = found["per_topic"][m]
        assert values[1] is None
        assert values[0] == pytest.approx(hand_values()[m], abs=1e-12)
        assert values[2] == pytest.approx(values[0], abs=1e-15)
        assert found["mean"][m] == pytest.approx(values[0], abs=1e-12)
    nothing = gensim_coherence([["nowhere", "unused"]], texts, vocab, progress=False)
    assert nothing["mean"] == {m: None for m in GENSIM_MEASURES}


def test_parse_measures():
    assert parse_measures("all") == GENSIM_MEASURES
    assert parse_measures("u_mass, c_v,u_mass") == ("u_mass", "c_v")
    assert parse_measures(["c_npmi"]) == ("c_npmi",)
    with pytest.raises(ValueError, match="known: c_v, c_npmi, c_uci, u_mass"):
        parse_measures("c_v,cv")
    with pytest.raises(ValueError):
        parse_measures("")


# ----------------------------------------------------------------------- gensim itself
@pytest.mark.benchmark
def test_equals_gensim_when_it_is_installed():
    """gensim is a benchmark-only package (benchmarks/requirements.txt), so this runs with the
    benchmarks: pytest -m benchmark (benchmarks/bench_coherence.py does it at corpus scale).
    w12 and w13 never occur: gensim's dictionary lacks them and leaves them out of their
    topics, as topictk does."""
    corpora = pytest.importorskip("gensim.corpora")
    coherencemodel = pytest.importorskip("gensim.models.coherencemodel")
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(14)]
    docs = [[vocab[w] for w in rng.integers(0, 12, rng.integers(1, 140))] for _ in range(40)]
    topics = [[vocab[i] for i in rng.permutation(14)[:6]] for _ in range(5)]
    found = gensim_coherence(topics, texts_of(docs, vocab), vocab, progress=False)
    dictionary = corpora.Dictionary(docs)
    for m in GENSIM_MEASURES:
        model = coherencemodel.CoherenceModel(topics=topics, texts=docs, dictionary=dictionary,
                                              coherence=m, processes=1)
        np.testing.assert_allclose(found["per_topic"][m], model.get_coherence_per_topic(),
                                   rtol=0, atol=1e-12)


# ------------------------------------------------------------ evaluate, reference corpus
@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A short Gibbs run on a store of 30 random texts over 10 words, and a reference store
    whose vocabulary is another (shuffled, with words the run lacks and without two of its
    words)."""
    tmp = tmp_path_factory.mktemp("coherence")
    rng = np.random.default_rng(0)
    train = [rng.integers(0, 10, rng.integers(5, 40)) for _ in range(30)]
    test = [rng.integers(0, 10, rng.integers(2, 10)) for _ in range(5)]
    held = [rng.integers(0, 10, rng.integers(1, 4)) for _ in range(5)]
    store = write_token_store(tmp / "store", train, 10, test_observed=test, test_heldout=held)
    vocab = [f"w{v:04d}" for v in range(10)]
    ref_vocab = [vocab[i] for i in (7, 3, 0, 9, 5, 1, 4, 2)] + ["other", "more"]
    ref_train = [rng.integers(0, 10, rng.integers(5, 60)) for _ in range(20)]
    reference = write_token_store(tmp / "reference", ref_train, 10, vocab=ref_vocab)
    config = {"corpus": str(store), "output": str(tmp / "run"),
              "model": {"topics": 3, "alpha": 0.5, "beta": 0.1},
              "inference": {"algorithm": "gibbs", "iterations": 10, "burn_in": 9, "thin": 1},
              "training": {"seed": 1, "threads": 1, "eval_every": 10, "checkpoint_every": 0},
              "evaluation": {"fold_in_sweeps": 4, "fold_in_burn_in": 2}}
    (tmp / "run.yaml").write_text(yaml.safe_dump(config))
    result = CliRunner().invoke(cli, ["train", "--config", str(tmp / "run.yaml"), "--quiet"])
    assert result.exit_code == 0, result.output
    return tmp / "run", store, reference


def test_evaluate_keeps_its_default_output(small_run):
    run, _, _ = small_run
    result = evaluate_run(run)
    assert "coherence" not in result and not set(GENSIM_MEASURES) & set(result)


def test_evaluate_on_training_texts_and_on_a_reference_store(small_run):
    run, store, reference = small_run
    plain = evaluate_run(run)
    result = evaluate_run(run, coherence="all")
    for key in ("umass", "npmi", "diversity", "perplexity"):
        assert result[key] == plain[key]               # the existing fields keep their values
    info = result["coherence"]
    assert info["texts"] == "training" and info["top"] == 10
    assert info["absent_words"] == {}
    # texts of 5 to 39 tokens: one window of 110 each; more windows of 10 than texts
    assert info["windows"]["c_v"] == info["windows"]["u_mass"] == 30
    assert info["windows"]["c_npmi"] == info["windows"]["c_uci"] > 30
    for m in GENSIM_MEASURES:
        assert math.isfinite(result[m])
        assert len(info["per_topic"][m]) == 3
    on_ref = evaluate_run(run, coherence=["c_npmi", "u_mass"], reference=reference)
    info = on_ref["coherence"]
    assert info["texts"] == str(reference)
    assert set(info["per_topic"]) == {"c_npmi", "u_mass"} and "c_v" not in on_ref
    # w0006 and w0008 are not in the reference vocabulary: reported for every topic
    assert info["absent_words"] == {"w0006": [0, 1, 2], "w0008": [0, 1, 2]}
    for m in ("c_npmi", "u_mass"):
        assert all(v is not None and math.isfinite(v) for v in info["per_topic"][m])
    # the same topics scored by word strings on the reference store directly
    top = [[w for w in words if w not in ("w0006", "w0008")] for words in _topics(run)]
    ref = CorpusStore.open(reference)
    direct = gensim_coherence(top, ref.train(), ref.vocab, ["c_npmi", "u_mass"],
                              progress=False)
    assert direct["per_topic"] == info["per_topic"]


def _topics(run) -> list[list[str]]:
    out = CliRunner().invoke(cli, ["topics", str(run), "--top", "10", "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    topics = data["topics"] if isinstance(data, dict) else data
    return [[w["word"] for w in t["words"]] for t in topics]


def test_the_command_shows_the_measures_and_the_c_v_caveat(small_run):
    run, _, reference = small_run
    out = CliRunner().invoke(cli, ["evaluate", str(run), "--coherence", "c_v,u_mass",
                                   "--reference", str(reference)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("c_v:"))
    assert "caveat" in lines[at + 1] and "Hoyle et al. 2021" in lines[at + 1]
    assert any(line.startswith("u_mass:") for line in lines)
    assert any(line.startswith("absent:") and "w0006" in line for line in lines)
    plain = CliRunner().invoke(cli, ["evaluate", str(run)])
    assert "c_v" not in plain.output and "caveat" not in plain.output
    out = CliRunner().invoke(cli, ["evaluate", str(run), "--json", "--coherence", "c_npmi"])
    data = json.loads(out.output)
    assert set(GENSIM_MEASURES) & set(data) == {"c_npmi"}


@pytest.mark.parametrize("args, message", [
    (["--coherence", "cv"], "unknown coherence measure"),
    (["--reference", "x"], "add --coherence"),
    (["--coherence", "c_v", "--reference", "/no/such/store"], "no corpus store"),
])
def test_the_command_refuses_bad_requests(small_run, args, message):
    run, _, _ = small_run
    out = CliRunner().invoke(cli, ["evaluate", str(run), *args])
    assert out.exit_code == 2
    assert message in out.output


def test_held_out_texts_give_no_nan(small_run):
    """On the store's test documents (a few short texts: some top words absent, many pairs
    never together) every value is a number or, for a topic left with fewer than two words,
    None."""
    run, store, _ = small_run
    opened = CorpusStore.open(store)
    texts = opened.test_observed()
    found = gensim_coherence(_topics(run), texts, opened.vocab, progress=False)
    present = set(np.asarray(texts.words).tolist())
    assert set(found["absent"]) == {w for i, w in enumerate(opened.vocab) if i not in present}
    for m in GENSIM_MEASURES:
        assert all(v is None or math.isfinite(v) for v in found["per_topic"][m])
        assert found["mean"][m] is None or math.isfinite(found["mean"][m])
