"""The WarpLDA sampler of collapsed Gibbs LDA (Chen et al. 2016): docs/algorithms.md §2.9.

The kernel is :mod:`topictk.inference.gibbs._warp`; its NumPy twin is ``tests/reference/warp.py``.
This module holds the word order of the word phase and the word chunks, the Gibbs drivers'
count representation of such a chain (:class:`WarpCounts`, ``inference.sampler: warp``: z and
n_k, and the non-zero counts of z for what reads them), and the scoring of its samples, which
keep non-zero counts only (:mod:`topictk.inference.gibbs._sparse_score`).
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from topictk import streams as keys
from topictk._cy.special import gammaln
from topictk.inference.gibbs import _sparse_score, _warp
from topictk.inference.base import resolve_blocks, resolve_chunks, tokens_by_word, word_frequencies
from topictk.inference.gibbs.counts import (
    GibbsCounts,
    SweepLayout,
    overlay_kwargs,
    overlay_log_prior,
    seed_start,
    warn_empty_topics,
    word_blocks,
)
from topictk.inference.hyper import minka_alpha_of_rows
from topictk.state.counts import WarpState


# entries whose documents are looked up at a time when the word order is built
BLOCK = 1 << 20


class WarpSampler:
    """The word order, the blocks and one sweep (§2.9).

    The tokens are grouped by word by a stable sort of the words (corpus order within a
    word); the words are cut into as many blocks as the documents
    (:func:`topictk.inference.gibbs.counts.word_blocks`). What only a sweep reads (the document of
    every entry, the words of every block, ``word_cuts[w, b]`` the first entry of word w in
    document block b) is built at the first sweep, so that a run that is only read (its
    evaluation, its topics, inference) does not hold it. All are functions of the corpus and
    the document blocks alone, built once.
    """

    def __init__(self, steps: int, doc_ptr: np.ndarray, words: np.ndarray, n_words: int,
                 word_block: np.ndarray, bounds: np.ndarray):
        self.steps = int(steps)
        position = np.int32 if words.size < 2**31 else np.int64
        # int32 positions below 2^31 tokens: half the memory of the word order
        self.word_ptr, self.word_tokens = tokens_by_word(words, n_words, position)
        self.word_block = np.ascontiguousarray(word_block, dtype=np.int32)
        self._corpus = (doc_ptr, words, n_words, bounds)

    @cached_property
    def layout(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(word_docs, word_cuts, word_list, word_bounds): what a sweep reads besides the word
        order, built when the first sweep asks for it."""
        doc_ptr, words, n_words, bounds = self._corpus
        # the document of every entry, a block of entries at a time (no N-sized temporary)
        word_docs = np.empty(words.size, dtype=np.int32)
        for begin in range(0, words.size, BLOCK):
            part = self.word_tokens[begin:begin + BLOCK]
            word_docs[begin:begin + part.size] = np.searchsorted(doc_ptr, part, "right") - 1
        word_list = np.argsort(self.word_block, kind="stable").astype(np.int32)
        n_blocks = bounds.size - 1
        word_bounds = np.zeros(n_blocks + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.word_block, minlength=n_blocks), out=word_bounds[1:])
        # a word's entries are in corpus order and a document block is a stretch of tokens:
        # its entries before block b are its tokens before the block's first token
        word_cuts = np.empty((n_words, n_blocks + 1), dtype=np.int64)
        before, start = np.zeros(n_words, dtype=np.int64), 0
        for b in range(n_blocks + 1):           # one pass over the tokens, block after block
            before += word_frequencies(words[start:doc_ptr[bounds[b]]], n_words)
            start = doc_ptr[bounds[b]]
            word_cuts[:, b] = self.word_ptr[:-1] + before
        return word_docs, word_cuts, word_list, word_bounds

    def sweep(self, state, alpha: np.ndarray, bounds: np.ndarray, doc_streams: list,
              word_streams: list, doc_ptr: np.ndarray, words: np.ndarray,
              threads: int, word_prior: dict | None = None) -> None:
        """One sweep on ``state``'s z and nk with the (K,) prior ``alpha``; the counts kept
        from the earlier z (``state.word_rows``) are dropped."""
        state.word_rows = None
        word_docs, word_cuts, word_list, word_bounds = self.layout
        _warp.warp_sweep(doc_ptr, words, self.word_ptr, self.word_tokens, word_docs,
                         word_cuts, word_list, word_bounds, self.word_block,
                         state.z, state.nk, _flat(alpha), float(state.beta), self.steps,
                         bounds, doc_streams, word_streams, threads, **(word_prior or {}))


class WarpCounts(GibbsCounts):
    """A WarpLDA-order chain (§2.9): the chain is z and n_k (:class:`WarpState`), swept by
    :class:`WarpSampler` on AD-LDA chunks and as many word blocks. Whatever reads n_kw (the
    top words, the log joint, a sample, a fold-in) gets its non-zero entries, counted from z
    once per sweep (``state.word_rows``), and n_dk's non-zero entries are counted when read
    (alpha's update, Protocol B): no (V, K) or (D, K) array is made unless :meth:`dense` is
    asked for."""

    name = "warp"
    ADLDA = True
    PHI_HAT = False             # scored from the non-zero counts

    def __init__(self, layout: SweepLayout, opts, steps: int, sync=None):
        super().__init__(layout, steps, sync)
        warn_empty_topics(layout)
        self.sampler = WarpSampler(steps, layout.doc_ptr, layout.words, layout.n_words,
                                   word_blocks(word_frequencies(layout.words, layout.n_words),
                                               layout.n_chunks), layout.bounds)

    @classmethod
    def reads(cls, arrays: dict) -> bool:
        return "ndk" not in arrays

    @classmethod
    def chain_arrays(cls, data, K, V, D, N):
        inference = data["inference"]
        chunks = inference.get("chunks")
        blocks = (resolve_chunks(chunks, N) if chunks is not None
                  else resolve_blocks(inference.get("blocks"), N))
        return [("WarpLDA word order", (N,), 4), ("WarpLDA entry documents", (N,), 4),
                ("WarpLDA word cuts", (V, blocks + 1), 8), ("sample non-zero counts", (N,), 8)]

    def state_class(self, base: type) -> type:
        return WarpState

    def initial(self, stream) -> tuple:
        """The z of §2.2 and n_k; no n_dk or n_kw."""
        z = initial_topics(self.layout.n_tokens, self.layout.n_topics, stream)
        seed_start(z, self.layout.words, self.seed_start)
        return z, None, None, word_frequencies(z, self.layout.n_topics)

    def sweep(self, state, prior, chunk_streams, streams, threads):
        L = self.layout
        word_streams = streams.chunk_streams(keys.WARP_WORDS, L.n_chunks, persistent=True)
        state.ndk = state.nkw = None    # the chain is z and nk (§2.9)
        self.sampler.sweep(state, prior, L.bounds, chunk_streams, word_streams, L.doc_ptr,
                           L.words, threads, self.word_prior)
        return 0, self.name

    def word_rows(self, state) -> dict[str, np.ndarray]:
        """The non-zero n_kw of z (``nkw_*``), counted once per sweep (kept in
        ``state.word_rows``, which a sweep clears)."""
        if state.word_rows is None:
            state.word_rows = sparse_counts(self.sampler.word_ptr, self.sampler.word_tokens,
                                            state.z, self.layout.n_topics, "nkw")
        return state.word_rows

    def document_rows(self, state) -> dict[str, np.ndarray]:
        """The non-zero n_dk of z (``ndk_*``)."""
        return sparse_counts(self.layout.doc_ptr, None, state.z, self.layout.n_topics, "ndk")

    def learnt_alpha(self, state) -> np.ndarray:
        """From histograms of the non-zero n_dk."""
        rows = self.document_rows(state)
        return minka_alpha_of_rows(rows["ndk_ptr"], rows["ndk_topic"], rows["ndk_count"],
                                   state.alpha)

    def ranked_words(self, state, n: int) -> tuple[np.ndarray, np.ndarray]:
        """From the non-zero n_kw (phi-hat_kw grows with n_kw within a topic), with
        phi-hat_kw = (n_kw + beta) / (n_k + V beta) of each; None with the seed words' prior
        (no longer ranked by the counts: from phi-hat)."""
        if self.overlay is not None:
            return None
        top, counts = top_words_of_rows(self.word_rows(state), self.layout.n_topics, n)
        probabilities = counts.astype(np.float64)
        probabilities += state.beta
        probabilities /= (state.nk + self.layout.n_words * state.beta)[:, None]
        return top, probabilities

    def objective(self, state, block: int = 1 << 20) -> float:
        """From the non-zero counts of z: sum_dk ln Gamma(n_dk + alpha_k) is D sum_k ln
        Gamma(alpha_k) plus, over the non-zero n_dk, ln Gamma(n_dk + alpha_k) - ln
        Gamma(alpha_k); the dense formula's value up to rounding, in memory O(non-zeros)."""
        alpha, beta = state.alpha, state.beta
        L = self.layout
        lengths = np.diff(L.doc_ptr)
        doc_part = L.n_docs * gammaln(alpha.sum()) - gammaln(alpha.sum() + lengths).sum()
        ndk = self.document_rows(state)
        for begin in range(0, ndk["ndk_count"].size, block):
            a = alpha[ndk["ndk_topic"][begin:begin + block]]
            doc_part += (gammaln(ndk["ndk_count"][begin:begin + block] + a) - gammaln(a)).sum()
        del ndk
        topic_part = self.topic_part(state.nk, beta)
        nkw = self.word_rows(state)
        for begin in range(0, nkw["nkw_count"].size, block):
            part = nkw["nkw_count"][begin:begin + block]
            topic_part += (gammaln(part + beta) - gammaln(beta)).sum()
        if self.overlay is not None:
            topic_part += overlay_log_prior(rows_at(nkw, self.overlay), state.nk, L.n_words,
                                            beta, self.overlay)
        return float((doc_part + topic_part) / max(L.n_tokens, 1))

    def sample(self, state, documents: bool) -> dict[str, np.ndarray]:
        """Non-zero counts (:func:`sparse_counts`), so that sampling adds no (V, K) or (D, K)
        array to the chain's memory."""
        arrays = {**self.word_rows(state), "nk": state.nk, "alpha": state.alpha}
        if documents:
            arrays.update(self.document_rows(state))
        return arrays

    def fold_in(self, state, sample, prior, documents, plan):
        """From the non-zero n_kw of the state or of ``sample`` (:func:`sparse_fold_in_theta`)
        with a prior shared by the documents; None for a prior per document or a sample with
        dense counts."""
        if np.ndim(prior) > 1 and np.shape(prior)[0] != 1:
            return None
        rows = self.word_rows(state) if sample is None else sample
        if "nkw_ptr" not in rows:
            return None
        nk = state.nk if sample is None else sample["nk"]
        return sparse_fold_in_theta(rows, nk, state.beta, prior, documents, plan,
                                    self.overlay)

    def averaged_fold_in(self, samples, beta, prior_of, docs, plan_of):
        """From samples kept as non-zero counts (:func:`sparse_fold_in`): the numbers of the
        dense path, in memory O(non-zeros + K) instead of O(V K)."""
        if not all("nkw_ptr" in s for s in samples):
            return None
        total = np.zeros(np.asarray(docs.heldout.indices).size)
        for s in samples:
            total += sparse_fold_in(s, beta, prior_of(s), docs, plan_of(), self.overlay)
        return total / len(samples)

    def check_resumable(self, state) -> None:
        if state.prop is not None:
            raise ValueError(f"the state of step {state.step} holds the pending proposals of "
                             f"the earlier inference.sampler = warp kernel, whose chain this "
                             f"version cannot continue (its topics can still be evaluated); "
                             f"train the run again from the start")


def initial_topics(n_tokens: int, n_topics: int, stream: np.random.PCG64,
                   block: int = 1 << 20) -> np.ndarray:
    """The initial topics of §2.2 (one uniform per token in canonical order,
    k = min(floor(u K), K - 1)): the z of ``_gibbs.init_topics`` without its dense counts."""
    generator = np.random.Generator(stream)
    z = np.empty(n_tokens, dtype=np.int32)
    for begin in range(0, n_tokens, block):       # the same uniforms, a block at a time
        u = generator.random(min(block, n_tokens - begin))
        u *= n_topics
        np.minimum(u, n_topics - 1, out=u)
        z[begin:begin + u.size] = u
    return z


def _flat(alpha: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.reshape(alpha, -1), dtype=np.float64)


def sparse_counts(row_ptr: np.ndarray, order: np.ndarray | None, z: np.ndarray,
                  n_topics: int, name: str) -> dict[str, np.ndarray]:
    """The non-zero (row, topic) counts of ``z`` as CSR arrays named after ``name`` (what a
    WarpLDA sample keeps, §2.9): ``{name}_ptr`` (R + 1) int64 offsets, ``{name}_topic`` and
    ``{name}_count`` int32, topics ascending in a row. Row r holds the tokens
    ``order[row_ptr[r]:row_ptr[r + 1]]`` (without ``order``: the tokens ``row_ptr[r]`` to
    ``row_ptr[r + 1]``, e.g. a document). Memory: the output and one K row."""
    ptr = np.zeros(row_ptr.size, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int32)
    topic, count = _warp.row_topic_counts(row_ptr, empty if order is None else order, z,
                                          n_topics, ptr)
    return {f"{name}_ptr": ptr, f"{name}_topic": topic, f"{name}_count": count}


def sample_rows(sample: dict, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR arrays of a sample's non-zero counts ``name`` (:func:`sparse_counts`)."""
    return (np.ascontiguousarray(sample[f"{name}_ptr"], dtype=np.int64),
            np.ascontiguousarray(sample[f"{name}_topic"], dtype=np.int32),
            np.ascontiguousarray(sample[f"{name}_count"], dtype=np.int32))


def rows_at(rows: dict, overlay) -> np.ndarray:
    """n_kw at the overlay's entries (CSR order) from non-zero counts ``nkw_*``."""
    ptr, topic, count = sample_rows(rows, "nkw")
    o_ptr, o_topic, _ = overlay
    out = np.zeros(o_topic.size)
    for w in np.flatnonzero(np.diff(o_ptr)).tolist():
        have = dict(zip(topic[ptr[w]:ptr[w + 1]].tolist(), count[ptr[w]:ptr[w + 1]].tolist()))
        for i in range(o_ptr[w], o_ptr[w + 1]):
            out[i] = have.get(int(o_topic[i]), 0)
    return out


def sparse_fold_in(sample: dict, beta: float, alpha: np.ndarray, docs, plan,
                   overlay=None) -> np.ndarray:
    """p-hat of every held-out entry of ``docs`` (an EvaluationSet) under a sample kept as
    non-zero counts: the Gibbs fold-in of :func:`topictk.inference.base.gibbs_fold_in` with
    ``plan`` and the prior ``alpha`` (K,), mixed with phi-hat, the same numbers as with the
    dense phi-hat without forming it (§2.9); entries of documents the plan skips are NaN."""
    obs, held = docs.observed, docs.heldout
    D = obs.n_docs
    active = plan.active_flags(D)
    out = np.empty(np.asarray(held.indices).size)
    _sparse_score.fold_in_probabilities(
        np.ascontiguousarray(obs.doc_ptr, dtype=np.int64),
        np.ascontiguousarray(obs.words, dtype=np.int32),
        np.ascontiguousarray(held.indptr, dtype=np.int64),
        np.ascontiguousarray(held.indices, dtype=np.int32), *sample_rows(sample, "nkw"),
        np.ascontiguousarray(sample["nk"], dtype=np.int64), float(beta), _flat(alpha),
        int(plan.sweeps), int(plan.burn_in), np.ascontiguousarray(plan.bounds, dtype=np.int64),
        plan.streams, active, out, int(plan.threads), **overlay_kwargs(overlay))
    return out


def sparse_fold_in_theta(rows: dict, nk: np.ndarray, beta: float, alpha: np.ndarray,
                         documents, plan, overlay=None) -> np.ndarray:
    """theta-hat (D, K) of ``documents`` (doc_ptr, words) by the Gibbs fold-in of
    :func:`topictk.inference.base.gibbs_fold_in` with ``plan`` and the prior ``alpha`` (K,)
    under the topics of non-zero counts ``rows`` (``nkw_*``) and ``nk``: the same numbers as
    with the dense phi-hat, without forming it (§2.9); rows of skipped documents are NaN."""
    doc_ptr = np.ascontiguousarray(documents.doc_ptr, dtype=np.int64)
    D, K = doc_ptr.size - 1, np.asarray(nk).size
    active = plan.active_flags(D)
    theta = np.empty((D, K))
    _sparse_score.fold_in_probabilities(
        doc_ptr, np.ascontiguousarray(documents.words, dtype=np.int32),
        np.zeros(D + 1, dtype=np.int64), np.zeros(0, dtype=np.int32), *sample_rows(rows, "nkw"),
        np.ascontiguousarray(nk, dtype=np.int64), float(beta), _flat(alpha), int(plan.sweeps),
        int(plan.burn_in), np.ascontiguousarray(plan.bounds, dtype=np.int64), plan.streams,
        active, np.empty(0), int(plan.threads), theta, **overlay_kwargs(overlay))
    return theta


def sparse_mixture(sample: dict, beta: float, alpha: np.ndarray, heldout,
                   threads: int = 1, overlay=None) -> np.ndarray:
    """p-hat of every entry of ``heldout`` (the training documents' held-out entries) with
    theta-hat_dk = (n_dk + alpha_k) / (N_d + alpha.) from the sample's non-zero n_dk (Protocol
    B, §11.2), the same numbers as with the dense theta-hat and phi-hat."""
    alpha = _flat(alpha)
    out = np.empty(np.asarray(heldout.indices).size)
    _sparse_score.mixture_probabilities(
        np.ascontiguousarray(heldout.indptr, dtype=np.int64),
        np.ascontiguousarray(heldout.indices, dtype=np.int32), *sample_rows(sample, "ndk"),
        alpha, float(alpha.sum()), *sample_rows(sample, "nkw"),
        np.ascontiguousarray(sample["nk"], dtype=np.int64), float(beta), out, int(threads),
        **overlay_kwargs(overlay))
    return out


def top_words_of_rows(rows: dict, n_topics: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(K, n) word ids of every topic by count descending, ties (the words without a count
    among them) by ascending word id, and their (K, n) counts, from word-major non-zero counts
    ``nkw_*``: the order of a stable argsort of -phi-hat, as phi-hat_kw grows with n_kw within
    a topic. Memory O(non-zeros + K n)."""
    ptr, topic, count = sample_rows(rows, "nkw")
    V = ptr.size - 1
    n = min(n, V)
    word = np.repeat(np.arange(V, dtype=np.int32), np.diff(ptr))
    order = np.lexsort((word, -count.astype(np.int64), topic))    # topic, count desc, word
    starts = np.searchsorted(topic[order], np.arange(n_topics + 1))
    top = np.empty((n_topics, n), dtype=np.int64)
    counts = np.zeros((n_topics, n), dtype=np.int64)
    for k in range(n_topics):
        ranked = order[starts[k]:min(starts[k + 1], starts[k] + n)]
        have = word[ranked]
        top[k, :have.size] = have
        counts[k, :have.size] = count[ranked]
        if have.size < n:          # then the words without a count, ascending
            counted = word[order[starts[k]:starts[k + 1]]]
            missing = n - have.size
            candidates = np.arange(min(V, missing + counted.size))
            top[k, have.size:] = candidates[~np.isin(candidates, counted)][:missing]
    return top, counts
