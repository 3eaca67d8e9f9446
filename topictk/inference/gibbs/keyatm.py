"""The keyword topic model (keyATM's base model, Eshima, Imai & Sasaki 2024) as a count
representation of the Gibbs driver: ``model.family: keyatm`` with ``inference.algorithm:
gibbs`` (docs/algorithms.md §2.13).

Topics 0..S-1 are the keyword topics of ``model.seed_words`` (in the mapping's order). A token
of a keyword topic k carries a switch s ~ Bernoulli(pi_k), pi_k ~ Beta(gamma1, gamma2): s = 1
draws its word from k's keyword distribution over k's seed words only (Dirichlet
``beta_keyword``), s = 0 from k's regular distribution over the vocabulary (Dirichlet beta).
The chain is (z, s) of every token, swept by :func:`topictk.inference.gibbs._keyatm.keyatm_sweep`.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from topictk._cy.special import gammaln
from topictk.inference.gibbs import _keyatm
from topictk.errors import ConfigError
from topictk.inference.gibbs.counts import (GibbsCounts, SweepLayout,
                                            refuse_cluster_and_mh_fold_in)
from topictk.inference.hyper import minka_alpha
from topictk.inference.seeds import seed_rows, setting
from topictk.state.keyatm import KeyATMState

#: keyATM's defaults (Eshima, Imai & Sasaki 2024; the keyATM package): pi_k ~ Beta(1, 1), the
#: keyword distributions' Dirichlet 0.1 (the regular ones' is model.beta)
GAMMA1, GAMMA2, BETA_KEYWORD = 1.0, 1.0, 0.1


def seed_lists(rows: list[tuple[str, list[int]]], n_words: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The keyword topics of every word, CSR by word: ``seed_ptr`` (V + 1) int64,
    ``seed_topic`` int32 ascending within a word; and ``seed_len`` (S,) int64, the L_k seed
    words of each keyword topic (the rows of :func:`topictk.inference.seeds.seed_rows`)."""
    pairs = sorted({(w, k) for k, (_, ids) in enumerate(rows) for w in ids})
    ptr = np.zeros(n_words + 1, dtype=np.int64)
    np.add.at(ptr, np.array([w + 1 for w, _ in pairs], dtype=np.int64), 1)
    np.cumsum(ptr, out=ptr)
    topic = np.array([k for _, k in pairs], dtype=np.int32)
    length = np.array([len(set(ids)) for _, ids in rows], dtype=np.int64)
    return ptr, topic, length


def keyatm_counts(doc_ptr: np.ndarray, words: np.ndarray, z: np.ndarray, s: np.ndarray,
                  K: int, S: int, V: int) -> tuple[np.ndarray, ...]:
    """(n_dk (D, K) int32, n_kw (V, K) int32 and n_k (K,) int64 of the regular tokens,
    n~_kw (V, S) int32 and n~_k (S,) int64 of the keyword tokens), counted from (z, s)."""
    D = doc_ptr.size - 1
    doc = np.repeat(np.arange(D), np.diff(doc_ptr))
    ndk = np.zeros((D, K), dtype=np.int32)
    np.add.at(ndk, (doc, z), 1)
    key = s.astype(bool)
    nkw = np.zeros((V, K), dtype=np.int32)
    np.add.at(nkw, (words[~key], z[~key]), 1)
    nkey = np.zeros((V, S), dtype=np.int32)
    np.add.at(nkey, (words[key], z[key]), 1)
    return (ndk, nkw, nkw.sum(axis=0, dtype=np.int64), nkey,
            nkey.sum(axis=0, dtype=np.int64))


def initial_chain(doc_ptr, words, K: int, seeds: tuple, stream) -> tuple[np.ndarray, ...]:
    """(z, s) of the first state, after keyATM's start: a token of a seed word takes one of
    the word's keyword topics (uniformly) with s = 1, any other token a uniform topic with
    s = 0; all from ``stream`` (one uniform per token, in token order)."""
    seed_ptr, seed_topic, _ = seeds
    u = np.random.Generator(stream).random(words.size)
    n_key = (seed_ptr[words + 1] - seed_ptr[words])
    s = (n_key > 0).astype(np.int8)
    z = np.minimum((u * K).astype(np.int64), K - 1)
    pick = np.minimum((u * np.maximum(n_key, 1)).astype(np.int64), np.maximum(n_key, 1) - 1)
    keyed = s.astype(bool)
    z[keyed] = seed_topic[seed_ptr[words[keyed]] + pick[keyed]]
    return z.astype(np.int32), s


def pi_hat(nk: np.ndarray, nkey_k: np.ndarray, gamma1: float, gamma2: float) -> np.ndarray:
    """pi-hat_k = (n~_k + gamma1) / (n_k + n~_k + gamma1 + gamma2) of the S keyword topics."""
    S = nkey_k.size
    return (nkey_k + gamma1) / (nk[:S] + nkey_k + gamma1 + gamma2)


class KeyATMCounts(GibbsCounts):
    """z, the switches s and the counts of :func:`keyatm_counts`, swept by AD-LDA chunks: one
    chunk samples in place (the exact sampler); with C > 1 chunks, each samples against its
    own copy of the topic counts of the start of the sweep, which are then added up in chunk
    order (integers: the same sums at any thread count)."""

    name = "keyatm"
    ADLDA = True

    @classmethod
    def of_family(cls, layout, opts, steps, sync, config, vocab):
        return cls(layout, opts, steps, sync, config=config, vocab=vocab)

    @classmethod
    def check_family(cls, data: dict, where: str) -> None:
        """The keyword topic model needs seed words and samples by its own sweep on AD-LDA
        chunks, on one machine."""
        inference = data["inference"]
        if not data["model"].get("seed_words"):
            raise ConfigError(f"model.family: keyatm needs keyword topics: give "
                              f"model.seed_words or model.seed_file ({where})")
        if inference.get("sampler") not in (None, "auto", "sparse", "dense"):
            raise ConfigError(f"inference.sampler: {inference['sampler']} does not sample the "
                              f"keyword topic model; leave inference.sampler out ({where})")
        if inference.get("blocks") not in (None, "auto"):
            raise ConfigError(f"inference.blocks: the keyword topic model samples AD-LDA "
                              f"chunks; set inference.chunks instead ({where})")
        refuse_cluster_and_mh_fold_in(data, where, "keyatm")

    def __init__(self, layout: SweepLayout, opts, steps: int, sync=None, *, config=None,
                 vocab=None):
        super().__init__(layout, steps, sync)
        model = config.model
        rows = seed_rows(config, vocab)
        self.labels = [label for label, _ in rows]
        self.seeds = seed_lists(rows, layout.n_words)
        self.S = len(rows)
        self.gamma1 = float(setting(model, "gamma1", GAMMA1))
        self.gamma2 = float(setting(model, "gamma2", GAMMA2))
        self.beta_key = float(setting(model, "beta_keyword", BETA_KEYWORD))
        # the seed words of each keyword topic, a (S, V) mask for phi-tilde
        self.seed_mask = np.zeros((self.S, layout.n_words), dtype=bool)
        for k, (_, ids) in enumerate(rows):
            self.seed_mask[k, ids] = True

    @classmethod
    def chain_arrays(cls, data, K, V, D, N):
        """The switches, the counts (topic-word (V, K), document-topic (D, K), keyword
        (V, S)) and, with C > 1 AD-LDA chunks, what :meth:`sweep` copies: each chunk's own
        topic-word and keyword counts and the start of the sweep's, C + 1 copies."""
        seeds = data["model"].get("seed_words") or {}
        S = len(seeds)
        chunks = data["inference"].get("chunks")
        from topictk.inference.base import resolve_chunks   # noqa: PLC0415
        C = resolve_chunks(chunks or "auto", N)
        return [("switch of every token", (N,), 1), ("topic-word counts", (V, K), 4),
                ("document-topic counts", (D, K), 4), ("keyword counts", (V, S), 4),
                *([("AD-LDA copies of the topic-word and keyword counts", (C + 1, V, K + S),
                    4)] if C > 1 else [])]

    def state_class(self, base: type) -> type:
        return KeyATMState

    def initial(self, stream) -> tuple:
        L = self.layout
        z, s = initial_chain(L.doc_ptr, L.words, L.n_topics, self.seeds, stream)
        self._initial_s = s
        ndk, nkw, nk, _, _ = keyatm_counts(L.doc_ptr, L.words, z, s, L.n_topics, self.S,
                                           L.n_words)
        return z, ndk, nkw, nk

    def started(self, state):
        """The first state's switches and keyword counts (after :meth:`initial`)."""
        L = self.layout
        state.s = self._initial_s
        _, _, _, state.nkey, state.nkey_k = keyatm_counts(
            L.doc_ptr, L.words, state.z, state.s, L.n_topics, self.S, L.n_words)
        return state

    def grown(self, state, old):
        """The added tokens start regular (s = 0); every count is counted again from
        (z, s)."""
        L = self.layout
        state.s = np.concatenate([old.s, np.zeros(L.n_tokens - old.s.size, dtype=np.int8)])
        (state.ndk, state.nkw, state.nk, state.nkey, state.nkey_k) = keyatm_counts(
            L.doc_ptr, L.words, state.z, state.s, L.n_topics, self.S, L.n_words)
        return state

    def sizes(self) -> dict:
        return {"S": self.S}

    def _chunk(self, state, prior, counts, c, stream) -> int:
        L = self.layout
        nkw, nk, nkey, nkey_k = counts
        seed_ptr, seed_topic, seed_len = self.seeds
        return _keyatm.keyatm_sweep(L.doc_ptr, L.words, int(L.bounds[c]), int(L.bounds[c + 1]),
                                    state.z, state.s, state.ndk, nkw, nk, nkey, nkey_k, prior,
                                    state.beta, self.beta_key, self.gamma1, self.gamma2,
                                    seed_ptr, seed_topic, seed_len, stream)

    def sweep(self, state, prior, chunk_streams, streams, threads):
        L = self.layout
        shared = (state.nkw, state.nk, state.nkey, state.nkey_k)
        if L.n_chunks == 1:
            return int(self._chunk(state, prior, shared, 0, chunk_streams[0])), self.name
        copies, start = self._copies(shared)
        with ThreadPoolExecutor(max_workers=max(1, min(threads, L.n_chunks))) as pool:
            done = list(pool.map(lambda c: self._chunk(state, prior, copies[c], c,
                                                       chunk_streams[c]),
                                 range(L.n_chunks)))
        for copy in copies:                 # chunk order; integer sums
            for total, mine, before in zip(shared, copy, start):
                total += mine - before
        return int(sum(done)), self.name

    def _copies(self, shared: tuple) -> tuple[list[tuple], tuple]:
        """Each chunk's copy of the counts ``shared`` and the start of the sweep's, in buffers
        kept from sweep to sweep (they stay allocated, as the memory check counts them)."""
        buffers = getattr(self, "_buffers", None)
        if buffers is None or any(b.shape != a.shape for b, a in zip(buffers[0], shared)):
            buffers = [tuple(np.empty_like(a) for a in shared)
                       for _ in range(self.layout.n_chunks + 1)]
            self._buffers = buffers
        for copy in buffers:
            for mine, total in zip(copy, shared):
                np.copyto(mine, total)
        return buffers[:-1], buffers[-1]

    def learnt_alpha(self, state) -> np.ndarray:
        return minka_alpha(state.ndk, state.alpha)

    def phi(self, nkw, nk, nkey, nkey_k, beta) -> np.ndarray:
        """phi-hat (K, V) for evaluation: (1 - pi-hat_k) phi_k + pi-hat_k phi~_k for a keyword
        topic (phi~_kw = (n~_kw + beta~) / (n~_k + L_k beta~) on k's seed words, 0
        elsewhere), the regular phi_k = (n_kw + beta) / (n_k + V beta) for the others."""
        V, K = nkw.shape
        phi = ((nkw + beta) / (nk + V * beta)).T.copy()
        if self.S:
            pi = pi_hat(nk, nkey_k, self.gamma1, self.gamma2)
            key = (nkey.T + self.beta_key) / (nkey_k + self.seeds[2] * self.beta_key)[:, None]
            phi[:self.S] *= (1.0 - pi)[:, None]
            phi[:self.S] += np.where(self.seed_mask, key, 0.0) * pi[:, None]
        return phi

    def topic_word(self, state) -> np.ndarray:
        return self.phi(state.nkw, state.nk, state.nkey, state.nkey_k, state.beta)

    def sample_phi(self, sample: dict, beta: float) -> np.ndarray:
        """Word-major (V, K), as the driver's phi-hat of a sample."""
        return self.phi(sample["nkw"], sample["nk"], sample["nkey"], sample["nkey_k"],
                        beta).T

    def objective(self, state) -> float:
        """Collapsed log joint ln p(w, z, s | alpha, beta, beta~, gamma) per token: LDA's
        document and regular topic terms, the keyword topics' Dirichlet-multinomial terms
        over their seed words and the Beta-binomial terms of the switches."""
        alpha, beta, L = state.alpha, state.beta, self.layout
        lengths = np.diff(L.doc_ptr)
        doc = L.n_docs * (gammaln(alpha.sum()) - gammaln(alpha).sum())
        doc += (gammaln(state.ndk + alpha).sum() - gammaln(alpha.sum() + lengths).sum())
        V = L.n_words
        topic = L.n_topics * gammaln(V * beta) - gammaln(V * beta + state.nk).sum()
        nz = state.nkw[state.nkw > 0]
        topic += (gammaln(nz + beta) - gammaln(beta)).sum()
        if self.S:
            b, seed_len = self.beta_key, self.seeds[2]
            topic += (gammaln(seed_len * b) - gammaln(seed_len * b + state.nkey_k)).sum()
            nz = state.nkey[state.nkey > 0]
            topic += (gammaln(nz + b) - gammaln(b)).sum()
            g1, g2, n0, n1 = self.gamma1, self.gamma2, state.nk[:self.S], state.nkey_k
            topic += (gammaln(g1 + g2) - gammaln(g1) - gammaln(g2) + gammaln(n1 + g1)
                      + gammaln(n0 + g2) - gammaln(n0 + n1 + g1 + g2)).sum()
        return float((doc + topic) / max(L.n_tokens, 1))

    def sample(self, state, documents: bool) -> dict[str, np.ndarray]:
        arrays = {"nkw": state.nkw, "nk": state.nk, "nkey": state.nkey,
                  "nkey_k": state.nkey_k, "alpha": state.alpha}
        if documents:
            arrays["ndk"] = state.ndk
        return arrays

    def check_restored(self, state) -> None:
        if state.nkey.shape[1] != self.S:
            raise ValueError(f"the checkpoint holds {state.nkey.shape[1]} keyword topics, the "
                             f"config's model.seed_words {self.S}")
