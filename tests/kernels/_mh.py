"""Calling the MH kernels the way topictk.inference.gibbs.mh does, for the kernel tests, also with
the word terms the driver does not pass yet (an overlay of the word prior, a given phi)."""
from __future__ import annotations

import numpy as np

from topictk.inference.gibbs import _mh
from topictk.inference.base import FoldInPlan
from topictk.inference.gibbs.mh import CountTables, MHSampler


def overlay_arguments(overlay) -> dict:
    """The kernels' keyword arguments of an overlay (ptr, topic, extra), or none."""
    if overlay is None:
        return {}
    ptr, topic, extra = overlay
    return {"prior_ptr": ptr, "prior_topic": topic, "prior_extra": extra}


def overlay_rows(overlay, rows: np.ndarray):
    """The overlay's rows ``rows``, in that order, as a CSR triple."""
    ptr, topic, extra = overlay
    picked = [np.arange(ptr[r], ptr[r + 1]) for r in rows]
    at = np.concatenate(picked) if picked else np.zeros(0, np.int64)
    out = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([p.size for p in picked], out=out[1:])
    return out, topic[at], extra[at]


class MHChain:
    """Counts, z and the tables of one MH chain driven by the kernels; ``overlay`` (a CSR
    triple) or ``phi`` (K, V) are passed to the kernels when given."""

    def __init__(self, doc_ptr, words, z, ndk, nkw, nk, beta: float, steps: int = 2,
                 rebuild: int = 1, overlay=None, phi=None):
        self.doc_ptr, self.words = doc_ptr, words
        self.z, self.ndk, self.nkw, self.nk = z, ndk, nkw, nk
        self.beta = beta
        self.step = 0
        self.table_z = None
        self.overlay = overlay_arguments(overlay)
        self.terms = dict(self.overlay, **({} if phi is None else {"phi": phi}))
        self.sampler = MHSampler(steps, rebuild, words, nkw.shape[0], ndk.shape[1])

    def build(self, z, threads: int = 1) -> None:
        """The tables from ``z``, with the overlay when there is one."""
        s = self.sampler
        s.dense_mass = _mh.build_tables(s.word_ptr, s.word_tokens, z, self.beta, s.ptr,
                                        s.topic, s.count, s.prob, s.alias, s.length, s.mass,
                                        s.nk, s.rden, s.dense_prob, s.dense_alias, threads,
                                        **self.overlay)
        s._built = True

    def sweep(self, alpha, bounds, streams, threads: int = 1) -> None:
        """One sweep, tables rebuilt on the sampler's schedule (the driver's code path)."""
        alpha = np.asarray(alpha, np.float64)
        if not self.terms:
            self.sampler.sweep(self, alpha, bounds, streams, self.doc_ptr, self.words,
                               threads)
        else:
            self._sweep_with_terms(np.ascontiguousarray(np.atleast_2d(alpha)), bounds,
                                   streams, threads)
        self.step += 1

    def _sweep_with_terms(self, alpha, bounds, streams, threads: int) -> None:
        s = self.sampler
        if self.step % s.rebuild == 0:
            self.build(self.z, threads)
            self.table_z = self.z.copy() if s.rebuild > 1 else None
        _mh.mh_sweep(self.doc_ptr, self.words, self.z, self.ndk, self.nkw, self.nk, alpha,
                     s.proposal_prior(alpha), self.beta, bounds, streams, s.steps, s.ptr,
                     s.topic, s.count, s.prob, s.alias, s.length, s.mass, s.nk, s.rden,
                     s.dense_prob, s.dense_alias, s.dense_mass,
                     self.table_z if s.rebuild > 1 else None, threads, **self.terms)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.z, self.ndk, self.nkw, self.nk


def fold_in(nkw, nk, beta: float, alpha, doc_ptr, words, plan: FoldInPlan, steps: int,
            overlay=None, phi=None) -> np.ndarray:
    """theta-hat as :func:`topictk.inference.gibbs.mh.mh_fold_in` forms it, with the word terms:
    the tables' denominators from the whole overlay, the overlay's rows and phi's columns
    those of the words the documents hold (the tables')."""
    alpha = np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)
    vocab, local = np.unique(np.asarray(words), return_inverse=True)
    tables = CountTables(nkw, nk, vocab, beta, plan.threads)
    terms = {}
    if overlay is not None:
        tables.dense_mass = _mh.build_count_tables(
            np.ascontiguousarray(nkw, np.int32), np.ascontiguousarray(nk, np.int64),
            vocab.astype(np.int64), float(beta), tables.ptr, tables.topic, tables.count,
            tables.prob, tables.alias, tables.length, tables.mass, tables.rden,
            tables.dense_prob, tables.dense_alias, plan.threads, **overlay_arguments(overlay))
        terms = overlay_arguments(overlay_rows(overlay, vocab))
    if phi is not None:
        terms = {"phi": np.ascontiguousarray(phi[:, vocab])}
    theta = np.full((doc_ptr.size - 1, nkw.shape[1]), np.nan)
    _mh.mh_fold_in(np.asarray(doc_ptr, np.int64), local.reshape(-1).astype(np.int32), alpha,
                   int(steps), plan.sweeps, plan.burn_in, np.asarray(plan.bounds, np.int64),
                   plan.streams, plan.active_flags(doc_ptr.size - 1), theta, *tables.arrays(),
                   plan.threads, **terms)
    return theta
