"""A Gibbs chain whose sweeps run on a Dask cluster (docs/algorithms.md §2.4): the shards of
AD-LDA chunks sweep on the workers, which keep z and n_dk between sweeps, against the global
n_kw and n_k the driver holds. :class:`GibbsClusterMixin` gives the Gibbs drivers (gibbs,
dmr-sem) what that takes: handing the shards out, the sweep, bringing z and n_dk back when
something reads them, and going back to the last whole state when a worker or the cluster is
lost. The shard work itself is :class:`topictk.inference.gibbs.shards.ShardedGibbs`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topictk.errors import UsageError
from topictk.inference.gibbs.counts import sweep_label
from topictk.inference.gibbs.shards import ShardedGibbs


@dataclass
class RestartPoint:
    """What a Gibbs chain on a cluster goes back to when a worker is lost: the step, and the
    counts, alpha and chunk-stream states of that step (z and ndk are the driver's copies,
    which are not touched until the next gather, after which a newer point is taken)."""

    step: int
    nkw: np.ndarray
    nk: np.ndarray
    alpha: np.ndarray
    streams: list

    @classmethod
    def of(cls, state, chunk_streams: list) -> RestartPoint:
        return cls(state.step, state.nkw.copy(), state.nk.copy(), state.alpha.copy(),
                   [bg.state for bg in chunk_streams])

    def restore(self, state, chunk_streams: list) -> None:
        state.nkw[...] = self.nkw
        state.nk[...] = self.nk
        state.alpha = self.alpha.copy()
        state.step = self.step
        for bg, saved in zip(chunk_streams, self.streams):
            bg.state = saved


class GibbsClusterMixin:
    """The cluster side of a Gibbs driver, which has ``counts`` (its
    :class:`topictk.inference.gibbs.counts.GibbsCounts`), ``bounds``, ``n_chunks``,
    ``sweep_prior`` and ``after_sweep``. ``remote`` is None on one machine."""

    remote = None               # the shards (ShardedGibbs) once use_cluster was called
    _restart: RestartPoint | None = None
    _updating = False           # inside after_sweep's alpha update

    def use_cluster(self, cluster) -> None:
        """Sweep the shards on ``cluster``: z and ndk live on its workers between sweeps, and
        the driver's copies are brought up to date when something reads them (checkpoints,
        samples, alpha updates, the log joint)."""
        super().use_cluster(cluster)        # a driver without cluster support refuses here
        if not self.counts.CLUSTER:
            self.cluster = None
            raise UsageError(f"inference.sampler: {self.counts.name} does not run on a Dask "
                             f"cluster; train it on one machine or choose "
                             f"inference.sampler: sparse")
        self.remote = ShardedGibbs(cluster, self.store, self.doc_ptr, self.bounds)

    def _remote_sweep(self, state, chunk_streams: list) -> tuple[int, str]:
        """The sweep of ``step`` on the cluster: the same sampler choice, made here from the
        global counts, and the same chunks with the same streams. A worker lost on the way is
        recovered from (:meth:`_recover`) and the sweep done again. Returns (rounding
        fallbacks, the sampler that ran)."""
        sparse = self.counts.sparse_choice(state)

        def attempt() -> tuple[int, str]:
            if self.remote.shards is None:
                self.remote.distribute(state.z, state.ndk, state.nkw)
            if not self.remote.stale:           # the driver holds the whole state: keep it
                self._restart = RestartPoint.of(state, chunk_streams)
            fallbacks = self.remote.sweep(state.nkw, state.nk, self.sweep_prior(state),
                                          state.beta, sparse, chunk_streams,
                                          self.counts.overlay)
            return fallbacks, sweep_label(sparse)

        return self.remote.recovering(lambda exc: self._recover(state, chunk_streams, exc),
                                      attempt)

    def global_draws(self, state) -> None:
        """The representation's draws after sweep ``state.step`` (an HDP's split-merge moves,
        tables, weights and concentrations), from z and n_dk brought back from the cluster
        when it sweeps there: the same numbers as on one machine; a move that changed z has
        the shards sent out again before the next sweep. A worker lost while they are brought
        back is recovered from as for alpha's update (the sweeps redone stop short of this)."""
        if not self.counts.GLOBAL_DRAWS:
            return
        if self.remote is not None:
            previous, self._updating = self._updating, True
            try:
                self.synced(state)
            finally:
                self._updating = previous
        if self.counts.draw_globals(state, self.streams) and self.remote is not None:
            self.remote.release()           # the next sweep sends the moved z and n_dk out

    def _recover(self, state, chunk_streams: list, exc: Exception) -> None:
        """After a worker was lost: go back to the last step at which the driver held the whole
        state (its z and ndk as last gathered, with the counts, alpha and chunk streams kept
        then), send the shards out again and redo the sweeps since then. The chain is a
        function of that state, so the sweeps redone are the ones lost, bit for bit."""
        upto, back = state.step, self._restart
        # lost in the middle of after_sweep of step upto: that update is the caller's to make
        partial = self._updating
        self.remote.restart(exc, back.step, upto, "sweeps")
        back.restore(state, chunk_streams)  # state.z and state.ndk are those of back.step
        for t in range(back.step, upto):
            self._remote_sweep(state, chunk_streams)
            state.step = t + 1
            if not (partial and t + 1 == upto):
                self.after_sweep(state)

    def synced(self, state):
        """``state`` with z and ndk brought back from the cluster when they are behind."""
        if self.remote is None or not self.remote.stale:
            return state
        chunk_streams = self.streams.chunk_streams((3,), self.n_chunks, persistent=True)
        self.remote.recovering(lambda exc: self._recover(state, chunk_streams, exc),
                               lambda: self.remote.gather(state.z, state.ndk))
        return state

    def counted(self, state):
        """``state`` with ndk and nkw, counted from z when it has none (a WarpLDA-order state
        keeps z and nk only, §2.9)."""
        return self.counts.dense(state)

    def mark_step(self, state) -> None:
        """Nothing to copy: the restart point of the sweeps on the cluster is the mark."""

    def roll_back(self, state) -> int:
        """After the cluster was lost: the state as the driver last held it whole (the step
        before the sweep under way, or an earlier one when z and ndk were last gathered then);
        the shards are gone with the cluster."""
        if self.remote.stale:
            chunk_streams = self.streams.chunk_streams((3,), self.n_chunks, persistent=True)
            self._restart.restore(state, chunk_streams)
        self.remote.abandon()
        return state.step
