"""Calling the MH kernels the way topictk.inference.mh does, for the kernel tests."""
from __future__ import annotations

import numpy as np

from topictk.inference.mh import MHSampler


class MHChain:
    """Counts, z and the tables of one MH chain driven by the kernels."""

    def __init__(self, doc_ptr, words, z, ndk, nkw, nk, beta: float, steps: int = 2,
                 rebuild: int = 1):
        self.doc_ptr, self.words = doc_ptr, words
        self.z, self.ndk, self.nkw, self.nk = z, ndk, nkw, nk
        self.beta = beta
        self.step = 0
        self.table_z = None
        self.sampler = MHSampler(steps, rebuild, words, nkw.shape[0], ndk.shape[1])

    def sweep(self, alpha, bounds, streams, threads: int = 1) -> None:
        """One sweep, tables rebuilt on the sampler's schedule (the driver's code path)."""
        self.sampler.sweep(self, np.asarray(alpha, np.float64), bounds, streams,
                           self.doc_ptr, self.words, threads)
        self.step += 1

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.z, self.ndk, self.nkw, self.nk
