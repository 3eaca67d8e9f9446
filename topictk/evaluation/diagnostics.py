"""Per-topic diagnostics in the spirit of MALLET's diagnostics file (Mimno 2012), and the
flags that mark topics that look like junk.

For every topic k of a trained run, from its document-topic counts n_dk (training documents
d), its topic-word distribution phi_k (the run's point estimate, ``topic_word``) and the
training corpus:

``tokens``
    n_k = sum_d n_dk, the training tokens assigned to the topic. Where the counts come from
    depends on the algorithm (:func:`document_topic_blocks`): collapsed Gibbs runs (gibbs,
    WarpLDA and MH chains, dmr-sem) count the topic assignments z of the final state; cvb
    and cvb0 use their expected counts m_dk; vb uses its variational expected counts
    gamma_dk - alpha_k (= sum_w n_dw q(z = k | d, w)); pem the same, weighted over its
    particles by omega_dp. Runs that keep no per-document state (ovb, hsvg, sgrld,
    dmr-sgrld and the deep models) fold the training documents in with the topics fixed,
    as ``topictk infer`` does, and take the expected counts
    n_dk = sum_w n_dw theta_dk phi_kw / sum_j theta_dj phi_jw.
    Every algorithm's n_k therefore sums to the number of training tokens.
``doc_entropy``
    H(p(d | k)) in nats, with p(d | k) = n_dk / n_k over the training documents: low when
    the topic's tokens sit in few documents (at most ln D).
``eff_words``
    The effective number of words 1 / sum_w phi_kw^2 (MALLET's ``eff_num_words``): how many
    equally likely words would give phi_k's concentration.
``corpus_kl``
    KL(phi_k || p) in nats, p(w) the word frequencies of the training corpus (MALLET's
    ``corpus_dist``); words that never occur in the training documents are left out and
    phi_k renormalised over the others. Near 0 for a topic that is the corpus's own word
    distribution (a background topic).
``top_doc_share``
    The share of n_k held by the topic's :data:`TOP_DOCS` documents with the largest n_dk.
``word_length``
    The mean length in characters of the topic's :data:`TOP_WORDS` most probable words.
``nonwords``
    How many of those words look like non-words (:func:`is_nonword`).

A topic is flagged (``flags``, a list of the rules that fired):

``few documents``
    top_doc_share >= :data:`FEW_DOCS_SHARE` and doc_entropy <= ln :data:`FEW_DOCS_EFFECTIVE`
    (fewer than that many "effective" documents, exp(doc_entropy)).
``non-words``
    nonwords >= :data:`NONWORDS_MIN` of the top words, or word_length >=
    :data:`LONG_WORD_MEAN`.

The thresholds were set from the distributions of these measures over the topics of
collapsed Gibbs runs on 20 Newsgroups (benchmarks/results/diagnostics.md), where the topics of
uuencoded binaries and of single long postings stand apart from the rest.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator

import numpy as np
from scipy.special import rel_entr

from topictk.errors import UsageError
from topictk.evaluation.ldavis import term_frequencies
from topictk.evaluation.topic_listing import listing
from topictk.numbering import topic_number
from topictk.evaluation.tsv import tsv_rows

TOP_DOCS = 10     # documents whose share of a topic's tokens is top_doc_share
TOP_WORDS = 10    # top words whose length and spelling are judged

# "few documents": over the topics of two collapsed Gibbs runs on 20 Newsgroups (K = 100,
# benchmarks/results/diagnostics.md) half of the topics keep under 21 % of their tokens in
# their 10 largest documents and 90 % of them under 53 %, so a share alone would flag a tenth
# of good topics; the effective number of documents exp(doc_entropy) is ~400 at the median
# and >= 48 for every topic of ordinary words, while the topics of uuencoded binaries (11)
# and of one long program listing (27-29) fall below 30. 40 lies in that gap. Both
# conditions must hold, so that a small but genuine topic (few tokens over many documents,
# or a share raised by a few long postings in a widely used topic) is not flagged.
FEW_DOCS_SHARE = 0.5        # at least half of the tokens in the top TOP_DOCS documents
FEW_DOCS_EFFECTIVE = 40.0   # and exp(doc_entropy) below 40 documents

# "non-words": on the same runs, topics of ordinary words have at most one vowel-less
# abbreviation (ftp, pgp, nhl, mhz, dod) among their top 10 words, the uuencoded-binary
# topics four or five; 3 lies between. The mean length of the top words is 3 to 8.1
# characters on those runs (their tokeniser splits letter runs at digits); 12, half as long
# again as the longest, catches run-together character soup where digits are kept.
NONWORDS_MIN = 3            # of the TOP_WORDS top words
LONG_WORD_MEAN = 12.0       # mean characters of the top words
LONG_WORD = 25              # a single word this long is a non-word on its own

FLAG_FEW_DOCUMENTS = "few documents"
FLAG_NONWORDS = "non-words"

_VOWELS = re.compile(r"[aeiouy]", re.IGNORECASE)
_DIGIT = re.compile(r"\d")

#: the columns of the table, in order, and what each is (the headings of every format)
COLUMNS = {
    "topic": "topic number",
    "tokens": "training tokens assigned",
    "doc_entropy": "entropy of p(d|k) over training documents, nats",
    "eff_words": "effective number of words 1/sum phi_kw^2",
    "corpus_kl": "KL(phi_k || corpus word frequencies), nats",
    "top_doc_share": f"share of the topic's tokens in its top {TOP_DOCS} documents",
    "word_length": f"mean characters of the top {TOP_WORDS} words",
    "nonwords": f"top {TOP_WORDS} words that look like non-words",
    "flags": "junk rules that fired",
}

BLOCK_ROWS = 4096   # document rows converted to float64 at a time


# --------------------------------------------------------------------------- measures
def is_nonword(word: str) -> bool:
    """True for a word that does not look like a word of a language: one with a digit, one
    of :data:`LONG_WORD` characters or more, or an ASCII word without a vowel (a, e, i, o, u,
    y), as the letter runs of uuencoded lines mostly are (``bhj``, ``nrhj``). Words with
    other letters are judged by digits and length only."""
    if _DIGIT.search(word) or len(word) >= LONG_WORD:
        return True
    return word.isascii() and not _VOWELS.search(word)


class _DocumentStats:
    """Per-topic sums over document rows given block by block: n_k, sum_d n_dk ln n_dk (for
    the entropy) and the :data:`TOP_DOCS` largest n_dk."""

    def __init__(self, n_topics: int):
        self.tokens = np.zeros(n_topics)
        self.xlogx = np.zeros(n_topics)
        self.top = np.zeros((n_topics, 0))

    def add(self, counts: np.ndarray) -> None:
        """Add the (rows, K) document-topic counts of a block of documents."""
        counts = np.asarray(counts, dtype=np.float64)
        if counts.size == 0:
            return
        self.tokens += counts.sum(axis=0)
        self.xlogx += rel_entr(counts, 1.0).sum(axis=0)          # sum_d n_dk ln n_dk
        joined = np.concatenate([self.top, counts.T], axis=1)            # (K, kept + rows)
        if joined.shape[1] > TOP_DOCS:
            # the sum of the TOP_DOCS largest values does not depend on which of equal
            # values are kept, so a partition suffices here
            joined = np.partition(joined, joined.shape[1] - TOP_DOCS, axis=1)[:, -TOP_DOCS:]
        self.top = joined

    def doc_entropy(self) -> np.ndarray:
        """H(p(d|k)) = ln n_k - (1/n_k) sum_d n_dk ln n_dk, nats (0 for an empty topic)."""
        n = self.tokens
        safe = np.where(n > 0, n, 1.0)
        return np.where(n > 0, np.log(safe) - self.xlogx / safe, 0.0).clip(min=0.0)

    def top_share(self) -> np.ndarray:
        n = self.tokens
        return np.where(n > 0, self.top.sum(axis=1) / np.where(n > 0, n, 1.0), 0.0)


def effective_words(topic_word: np.ndarray) -> np.ndarray:
    """1 / sum_w phi_kw^2 for every topic, (K,)."""
    phi = np.asarray(topic_word, dtype=np.float64)
    return 1.0 / np.einsum("kw,kw->k", phi, phi)


def corpus_divergence(topic_word: np.ndarray, word_frequency: np.ndarray) -> np.ndarray:
    """KL(phi_k || p) in nats for every topic, (K,); p the word frequencies normalised, over
    the words with a non-zero frequency (phi_k renormalised over them)."""
    freq = np.asarray(word_frequency, dtype=np.float64)
    seen = freq > 0
    p = freq[seen] / freq[seen].sum()
    phi = np.asarray(topic_word, dtype=np.float64)[:, seen]
    phi = phi / phi.sum(axis=1, keepdims=True)
    return rel_entr(phi, p[None, :]).sum(axis=1)


def topic_diagnostics(topic_word: np.ndarray, doc_topic_blocks: Iterable[np.ndarray],
                      word_frequency: np.ndarray, vocab: list[str],
                      top: np.ndarray | None = None, shown: int = TOP_WORDS) -> list[dict]:
    """The diagnostics table (see the module docstring) from the run's parts.

    Parameters
    ----------
    topic_word : numpy.ndarray
        phi, (K, V), rows on the simplex.
    doc_topic_blocks : iterable of numpy.ndarray
        n_dk of the training documents, (rows, K) blocks of consecutive documents.
    word_frequency : numpy.ndarray
        (V,) occurrences of each word in the training documents.
    vocab : list of str
        The words of the V columns.
    top : numpy.ndarray, optional
        (K, >= max(TOP_WORDS, shown)) word ids of each topic, best first (default: by phi,
        ties by word id).
    shown : int
        Top words listed in ``words``; ``word_length`` and ``nonwords`` always judge the
        first :data:`TOP_WORDS`.

    Returns
    -------
    list of dict
        One dict per topic, in the model's order, with the keys of :data:`COLUMNS` and
        ``words`` (the top words); ``topic`` is the topic's number (from 1).
    """
    phi = np.asarray(topic_word, dtype=np.float64)
    K, V = phi.shape
    stats = _DocumentStats(K)
    for block in doc_topic_blocks:
        stats.add(block)
    if top is None:
        top = np.argsort(-phi, axis=1, kind="stable")
    top = np.asarray(top)
    entropy, share = stats.doc_entropy(), stats.top_share()
    eff, kl = effective_words(phi), corpus_divergence(phi, word_frequency)
    table = []
    for k in range(K):
        words = [vocab[w] for w in top[k, :TOP_WORDS]]
        row = {"topic": topic_number(k), "words": [vocab[w] for w in top[k, :shown]],
               "tokens": float(stats.tokens[k]), "doc_entropy": float(entropy[k]),
               "eff_words": float(eff[k]), "corpus_kl": float(kl[k]),
               "top_doc_share": float(share[k]),
               "word_length": float(np.mean([len(w) for w in words])) if words else 0.0,
               "nonwords": sum(is_nonword(w) for w in words)}
        row["flags"] = junk_flags(row)
        table.append(row)
    return table


def junk_flags(row: dict) -> list[str]:
    """The junk rules (module docstring) that a diagnostics row fires, in a fixed order."""
    flags = []
    if (row["top_doc_share"] >= FEW_DOCS_SHARE
            and row["doc_entropy"] <= math.log(FEW_DOCS_EFFECTIVE)):
        flags.append(FLAG_FEW_DOCUMENTS)
    if row["nonwords"] >= NONWORDS_MIN or row["word_length"] >= LONG_WORD_MEAN:
        flags.append(FLAG_NONWORDS)
    return flags


# --------------------------------------------------------------------------- from a run
def document_topic_blocks(run, *, sweeps: int = 50, burn_in: int = 25,
                          seed: int | None = None) -> Iterator[np.ndarray]:
    """n_dk of the run's training documents, (rows, K) float64 blocks in document order;
    which counts each algorithm gives is said in the module docstring. ``sweeps``,
    ``burn_in`` and ``seed`` are those of the fold-in of runs without per-document state."""
    from topictk.state.counts import CountState, WarpState
    from topictk.state.variational import CVBState, VBState

    state = run.state
    K = int(run.config.model.topics)
    if isinstance(state, CountState) and getattr(state, "ndk", None) is not None:
        yield from _row_blocks(state.ndk)
    elif isinstance(state, (CountState, WarpState)):     # a WarpLDA chain keeps z only
        doc_ptr = np.asarray(run.store.train().doc_ptr)
        z = np.asarray(state.z)
        for d0 in range(0, doc_ptr.size - 1, BLOCK_ROWS):
            d1 = min(d0 + BLOCK_ROWS, doc_ptr.size - 1)
            lo, hi = int(doc_ptr[d0]), int(doc_ptr[d1])
            doc_of = np.repeat(np.arange(d1 - d0), np.diff(doc_ptr[d0:d1 + 1]))
            yield np.bincount(doc_of * K + z[lo:hi], minlength=(d1 - d0) * K).reshape(
                d1 - d0, K).astype(np.float64)
    elif isinstance(state, CVBState):
        yield from _row_blocks(state.m_dk)
    elif isinstance(state, VBState):
        for block in _row_blocks(state.gamma):
            yield np.maximum(block - state.alpha[None, :], 0.0)
    elif getattr(state, "omega", None) is not None and np.ndim(state.gamma) == 3:   # pem
        gamma, omega, alpha = state.gamma, state.omega, state.alpha
        for d0 in range(0, omega.shape[0], BLOCK_ROWS):
            d1 = min(d0 + BLOCK_ROWS, omega.shape[0])
            mixed = np.einsum("dp,pdk->dk", omega[d0:d1], gamma[:, d0:d1])
            yield np.maximum(mixed - alpha[None, :], 0.0)
    else:
        yield from _folded_in_counts(run, sweeps=sweeps, burn_in=burn_in, seed=seed)


def _row_blocks(matrix: np.ndarray) -> Iterator[np.ndarray]:
    for d0 in range(0, matrix.shape[0], BLOCK_ROWS):
        yield np.asarray(matrix[d0:d0 + BLOCK_ROWS], dtype=np.float64)


def _folded_in_counts(run, *, sweeps: int, burn_in: int,
                      seed: int | None) -> Iterator[np.ndarray]:
    """Expected n_dk = sum_w n_dw theta_dk phi_kw / sum_j theta_dj phi_jw of the training
    documents folded in with the topics fixed."""
    phi = np.asarray(run.topic_word(), dtype=np.float64)         # (K, V)
    train = run.store.train()
    indptr, indices = np.asarray(train.indptr), np.asarray(train.indices)
    counts = np.asarray(train.counts, dtype=np.float64)
    for first, theta in run.training_fold_in(sweeps=sweeps, burn_in=burn_in, seed=seed):
        rows = theta.shape[0]
        out = np.zeros_like(theta)
        lo, hi = int(indptr[first]), int(indptr[first + rows])
        doc_of = np.repeat(np.arange(rows), np.diff(indptr[first:first + rows + 1]))
        for a in range(lo, hi, 1 << 16):            # (pairs, K) products a slice at a time
            b = min(a + (1 << 16), hi)
            weights = theta[doc_of[a - lo:b - lo]] * phi[:, indices[a:b]].T
            total = weights.sum(axis=1, keepdims=True)
            weights *= (counts[a:b, None] / np.where(total > 0, total, 1.0))
            np.add.at(out, doc_of[a - lo:b - lo], weights)
        yield out


def run_diagnostics(run, *, shown: int = TOP_WORDS, sweeps: int = 50, burn_in: int = 25,
                    seed: int | None = None) -> list[dict]:
    """:func:`topic_diagnostics` of a loaded run (:class:`topictk.evaluation.run.LoadedRun`):
    its topics (the bottom layer of a deep model), its training documents' counts
    (:func:`document_topic_blocks`) and the training corpus's word frequencies; ``shown``
    top words listed per topic. The topics are those the run shows, in its order (an HDP
    run's live topics, largest first: :func:`~topictk.evaluation.topic_listing.listing`)."""
    train = run.store.train()
    freq = term_frequencies(np.asarray(train.indices), np.asarray(train.counts),
                            run.store.n_words)
    n = min(max(TOP_WORDS, shown), run.driver.V)
    ranked = run.driver.ranked_words(run.state, n)
    phi = run.topic_word()
    table = topic_diagnostics(phi, document_topic_blocks(run, sweeps=sweeps, burn_in=burn_in,
                                                         seed=seed),
                              freq, list(run.store.vocab),
                              None if ranked is None else ranked[0], shown)
    listed = listing(run)       # an HDP run: its live topics, largest first
    return table if listed is None else [table[k] for k in listed.rows]


def render_diagnostics(run, *, fmt: str, top: int = TOP_WORDS, layer: int | None = None,
                       tree: bool = False) -> str:
    """What ``topictk topics --diagnostics`` prints (:func:`format_diagnostics`); the
    diagnostics are of the word-level topics, so a deep model's higher layers, its tree and
    DOT output are refused."""
    if tree or fmt == "dot" or (layer is not None and layer != 1):
        what = ("--tree" if tree else "--format dot" if fmt == "dot" else f"--layer {layer}")
        raise UsageError(f"--diagnostics: {what} cannot be shown with diagnostics, which are "
                         f"of the word topics (layer 1); leave out {what.split()[0]}")
    return format_diagnostics(run_diagnostics(run, shown=top), fmt)


# --------------------------------------------------------------------------- output
NUMBER_FORMATS = {"tokens": ".1f", "doc_entropy": ".3f", "eff_words": ".1f",
                  "corpus_kl": ".3f", "top_doc_share": ".3f", "word_length": ".1f",
                  "nonwords": "d"}


def legend() -> str:
    """One line saying what every column is."""
    return "; ".join(f"{name}: {what}" for name, what in COLUMNS.items())


def format_diagnostics(table: list[dict], fmt: str) -> str:
    """The table as aligned text (a legend line, a heading, one line per topic with its top
    words last), TSV (a heading row; ``flags`` and ``words`` joined by commas and spaces) or
    JSON (``{"columns": COLUMNS, "topics": table}``)."""
    if fmt == "json":
        return json.dumps({"columns": {**COLUMNS, "words": f"top {TOP_WORDS} words"},
                           "topics": table}) + "\n"
    names = list(NUMBER_FORMATS)
    if fmt == "tsv":
        return tsv_rows([("topic", *names, "flags", "words"),
                         *((r["topic"], *(format(r[n], NUMBER_FORMATS[n]) for n in names),
                            ",".join(r["flags"]), " ".join(r["words"])) for r in table)])
    heading = ["topic", *names, "flags"]
    cells = [[str(r["topic"]), *(format(r[n], NUMBER_FORMATS[n]) for n in names),
              ",".join(r["flags"]) or "-"] for r in table]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(heading)]

    def line(values: list[str]) -> str:
        first = values[0].rjust(widths[0])
        middle = [v.rjust(w) for v, w in zip(values[1:-1], widths[1:-1])]
        return "  ".join([first, *middle, values[-1].ljust(widths[-1])])

    lines = [f"# {legend()}", line(heading) + "  words"]
    lines += [line(c) + "  " + " ".join(r["words"]) for c, r in zip(cells, table)]
    return "\n".join(lines) + "\n"
