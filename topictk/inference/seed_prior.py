"""The seeded topic-word prior as the families that hold a (V, K) array of topics use it
(docs/algorithms.md §2.14): beta_wk = beta + o_wk, the overlay o (§2.12) (seed words) built once per
run by :func:`topictk.inference.seeds.seed_overlay`, CSR by word. The variational families
(vb, cvb, cvb0, ovb, hsvg, pem) and the SGRLD family (sgrld, dmr-sgrld) keep lambda, the
expected counts or phi-hat as dense (V, K) arrays anyway, so the overlay is applied entry by
entry to them (``add_to``), or densified when a family needs the whole prior (``dense``);
the CVB kernels take the CSR overlay itself.

Without seeds :func:`seed_prior` returns None and every family runs its symmetric-beta code
unchanged (the same numbers bit for bit).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln


@dataclass(frozen=True)
class SeedPrior:
    """The overlay o_wk > 0 at its ``n`` entries, in CSR order (word ascending, then topic).

    ptr (V + 1,) int64, topic (n,) int32, extra (n,) float64: the CSR arrays the kernels take;
    words (n,) int64: the word of each entry; V, K the shape of the prior.
    """

    ptr: np.ndarray
    topic: np.ndarray
    extra: np.ndarray
    words: np.ndarray
    V: int
    K: int

    @classmethod
    def from_csr(cls, ptr, topic, extra, K: int) -> "SeedPrior":
        ptr = np.ascontiguousarray(ptr, dtype=np.int64)
        topic = np.ascontiguousarray(topic, dtype=np.int32)
        extra = np.ascontiguousarray(extra, dtype=np.float64)
        V = ptr.size - 1
        words = np.repeat(np.arange(V, dtype=np.int64), np.diff(ptr))
        if topic.size and (topic.min() < 0 or topic.max() >= K):
            raise ValueError(f"the seed overlay names a topic outside [0, {K})")
        return cls(ptr, topic, extra, words, V, int(K))

    @property
    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(prior_ptr, prior_topic, prior_extra) as the kernels take them."""
        return self.ptr, self.topic, self.extra

    def dense(self) -> np.ndarray:
        """o as a word-major (V, K) array (zero where there is no seed)."""
        out = np.zeros((self.V, self.K))
        out[self.words, self.topic] = self.extra
        return out

    def add_to(self, target: np.ndarray, factor: float = 1.0) -> None:
        """target[w, k] += factor o_wk at the overlay's entries (``target`` word-major (V, K);
        the entries are distinct, so one fancy-indexed add is exact)."""
        target[self.words, self.topic] += factor * self.extra

    def column_sums(self) -> np.ndarray:
        """(K,) sum_w o_wk, added in CSR order."""
        out = np.zeros(self.K)
        np.add.at(out, self.topic, self.extra)
        return out

    def topic_totals(self, beta: float) -> np.ndarray:
        """(K,) beta-bar_k = V beta + sum_w o_wk."""
        return self.V * beta + self.column_sums()

    def at(self, array: np.ndarray) -> np.ndarray:
        """array[w, k] at the overlay's entries (word-major (V, K))."""
        return array[self.words, self.topic]

    def elbo_correction(self, lam_at: np.ndarray, lam_totals: np.ndarray,
                        beta: float) -> float:
        """What the topic part of the ELBO (§3.3) gains when the symmetric beta becomes
        beta + o: sum_k [lnGamma(beta-bar_k) - lnGamma(V beta)]
        - sum_(w,k) [lnGamma(beta + o_wk) - lnGamma(beta)] + sum_(w,k) o_wk E[ln phi_kw],
        with ``lam_at`` lambda at the overlay's entries and ``lam_totals`` lambda_k. (the
        sums over (w, k) run over the overlay's entries only: elsewhere o_wk = 0)."""
        elog = digamma(lam_at) - digamma(lam_totals[self.topic])
        return float((gammaln(self.topic_totals(beta)) - gammaln(self.V * beta)).sum()
                     - (gammaln(beta + self.extra) - gammaln(beta)).sum()
                     + np.dot(self.extra, elog))


class SeededDriverMixin:
    """``self.seeds``: the run's :class:`SeedPrior` (None without seed words), built once on
    first use from the config and the store's vocabulary."""

    @functools.cached_property
    def seeds(self) -> SeedPrior | None:
        return seed_prior(self.config, self.store, self.K)


def seed_prior(config, store, n_topics: int) -> SeedPrior | None:
    """The run's seeded prior over the store's vocabulary, None without seed words."""
    from topictk.inference.seeds import seed_overlay
    overlay = seed_overlay(config, store.vocab, store.train().n_tokens)
    if overlay is None:
        return None
    return SeedPrior.from_csr(*overlay, K=n_topics)
