"""Collapsed Gibbs sampling for LDA (Griffiths & Steyvers 2004), with SparseLDA (Yao, Mimno &
McCallum 2009) as the fast path and, for threads, the partitioned schedule (document and word
blocks; by default) or AD-LDA chunking (Newman et al. 2009).

docs/algorithms.md §2. The kernel is :mod:`topictk.inference.gibbs._gibbs`; its NumPy twin is
``tests/reference/gibbs.py``.
"""
from __future__ import annotations

import importlib
import logging

import numpy as np

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.errors import ConfigError, NumericalError
from topictk.inference.base import StepInfo, Traits, fixed_point_fold_in, fixed_point_settings
from topictk.inference.gibbs.cluster import GibbsClusterMixin
from topictk.inference.gibbs.grow import GrowMixin
from topictk.inference.gibbs import resume_rules
from topictk.inference.hyper import resolve_alpha
from topictk.inference.gibbs.counts import (
    GibbsCounts,
    SparseLDACounts,
    SweepLayout,
)
from topictk.inference.gibbs.counts import (  # noqa: F401  (the sweep schedule, also named here)
    BLOCK_GAP,
    block_order,
    list_offsets,
    word_blocks,
)
from topictk.inference.gibbs.mh import (
    MAX_REBUILD,
    MH_FROM_K,
    MH_REBUILD,
    MH_STEPS,
    MHCounts,
    mh_fold_in,
)
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.registry import register
from topictk.inference.seeds import seed_init_topics, seed_overlay, seed_words
from topictk.inference.sampled import (
    SampledDriver,
    evaluation_plan,
    resolve_sample_schedule,
)
from topictk.inference.gibbs.warp import WarpCounts, sparse_mixture
from topictk.state.counts import CountState, dense_counts
from topictk.streams import Streams

log = logging.getLogger("topictk")

#: ``inference.sampler: auto`` runs the WarpLDA-order sampler (§2.9) from this many topics on
#: in ``gibbs``. Measured side by side, one thread (benchmarks/results/mh.md): at K = 1,000
#: SparseLDA is ahead on KOS, NIPS and 20 Newsgroups; from K = 5,000 the warp chain reaches
#: SparseLDA's 200-sweep perplexity in a fraction of its time and ends at or below it.
WARP_FROM_K = 5_000


def resolved_sampler(inference, n_topics: int, warp: bool = True) -> str | None:
    """``inference.sampler`` with ``auto`` resolved for K topics: ``warp`` from WARP_FROM_K
    (when the driver has it, ``warp``), ``mh`` from MH_FROM_K, else None (as
    ``inference.sparse`` says); any other setting as it is."""
    choice = inference.get("sampler")
    if choice != "auto":
        return choice
    if warp and n_topics >= WARP_FROM_K:
        return "warp"
    return "mh" if n_topics >= MH_FROM_K else None


def check_schedule(data: dict, where: str, warp: bool = True) -> None:
    """``inference.chunks`` (AD-LDA) and ``inference.blocks`` (the partitioned schedule) are
    two schedules: give at most one of them; the MH sampler runs AD-LDA chunks only. A Dask
    cluster runs AD-LDA chunks only, so a cluster run names its chunks rather than silently
    running another chain than the same config on one machine. The families with counts of
    their own (:data:`FAMILY_COUNTS`) check theirs (:meth:`GibbsCounts.check_family`)."""
    inference, training = data["inference"], data.get("training", {})
    family = data["model"].get("family", "lda")
    if family in FAMILY_COUNTS:
        counts_class(inference, 0, family=family).check_family(data, where)
    blocks_given = inference.get("blocks") not in (None, "auto")
    if inference.get("chunks") is not None and blocks_given:
        raise ConfigError(f"inference.chunks = {inference['chunks']} and inference.blocks = "
                          f"{inference['blocks']} choose two different parallel schedules; "
                          f"set one of them and leave the other out ({where})")
    if blocks_given and resolved_sampler(
            inference, data["model"]["topics"], warp) in ("mh", "warp"):
        raise ConfigError(f"inference.blocks does not apply to the Metropolis-Hastings sampler "
                          f"(inference.sampler), which runs AD-LDA chunks; set "
                          f"inference.chunks instead ({where})")
    cluster = ("training.scheduler" if training.get("scheduler") is not None
               else "training.dask_workers" if training.get("dask_workers") is not None
               else None)
    if cluster is not None and inference.get("chunks") is None:
        raise ConfigError(f"{cluster}: a Dask cluster runs AD-LDA chunks, not the default "
                          f"partitioned schedule (inference.blocks); set inference.chunks "
                          f"(e.g. 2, the same chain on one machine) to train on a cluster "
                          f"({where})")


PAPERS = ("Griffiths & Steyvers 2004; Yao, Mimno & McCallum 2009; Newman et al. 2009; "
          "keyatm: Eshima, Imai & Sasaki 2024; hdp: Teh, Jordan, Beal & Blei 2006, Fox et al. "
          "2011")

#: the model families of the Gibbs driver whose counts are of their own: family -> (module,
#: class) of a GibbsCounts subclass
FAMILY_COUNTS = {"keyatm": ("topictk.inference.gibbs.keyatm", "KeyATMCounts"),
                 "hdp": ("topictk.inference.gibbs.hdp", "HDPCounts")}


def counts_class(inference, n_topics: int, warp: bool = True,
                 family: str = "lda") -> type[GibbsCounts]:
    """The count representation ``inference.sampler`` picks for K topics
    (:func:`resolved_sampler`): WarpLDA's, MH's, else the dense counts of SparseLDA and the
    dense sampler; the families of :data:`FAMILY_COUNTS` have counts of their own
    (:meth:`GibbsCounts.of_sampler`)."""
    if family in FAMILY_COUNTS:         # imported when used: each is a family of its own
        module, name = FAMILY_COUNTS[family]
        return getattr(importlib.import_module(module), name).of_sampler(
            resolved_sampler(inference, n_topics, warp))
    return {"warp": WarpCounts, "mh": MHCounts}.get(resolved_sampler(inference, n_topics, warp),
                                                   SparseLDACounts)


def count_representation(config, doc_ptr: np.ndarray, words: np.ndarray, n_words: int,
                         threads: int, warp: bool, sync, vocab=()) -> GibbsCounts:
    """The counts of a Gibbs chain as ``config`` says, on its sweep schedule
    (:meth:`SweepLayout.of`); ``sync`` brings z and n_dk back from a cluster. Seed words
    (docs/seeds.md, read from ``vocab``) give their start and (``seed_mode: prior``) their
    prior; the keyword topic model reads them its own way."""
    opts, K = config.inference, int(config.model.topics)
    family = getattr(config.model, "family", "lda")
    representation = counts_class(opts, K, warp, family)
    layout = SweepLayout.of(opts, doc_ptr, words, n_words, K, threads, representation.ADLDA)
    steps = MH_STEPS if getattr(opts, "mh_steps", None) is None else opts.mh_steps
    if family in FAMILY_COUNTS:
        return representation.of_family(layout, opts, steps, sync, config, vocab)
    counts = representation(layout, opts, steps, sync)
    if seed_words(config) and len(vocab):
        counts.overlay = seed_overlay(config, vocab)
        counts.seed_start = seed_init_topics(config, vocab)
    return counts


GIBBS_TRAITS = Traits(kind="sampled", paper=PAPERS, families=tuple(FAMILY_COUNTS),
                      cluster=True, cluster_fold_in=True, alpha_auto=True, sweep_steps=True,
                      objective="log_joint_per_token",
                      add_documents=("lda", *FAMILY_COUNTS))

#: ``inference.chunks`` and ``inference.blocks`` of the Gibbs drivers (gibbs, dmr-sem)
CHUNKS_OPTION = Option("int", None, low=1, auto=True, nullable=True,
                       help="AD-LDA chunks instead of the partitioned schedule: 1 = exact "
                            "sequential sampler; C = AD-LDA with C chunks (what a Dask cluster "
                            "runs); auto = 2 chunks (1 below 65,536 tokens), the default of "
                            "runs trained before inference.blocks; null = inference.blocks")
BLOCKS_OPTION = Option("int", "auto", low=1, auto=True, nullable=True,
                       help="blocks of the partitioned schedule (no stale counts but n_k), "
                            "which threads work on in parallel, used when inference.chunks is "
                            "null: 1 = exact sequential sampler; auto = 1 below 65,536 "
                            "training tokens, 4 below 2^22, 8 below 2^25, else 16: fixed by "
                            "the corpus, never by the thread count; null = 2 (1 below 65,536), "
                            "the default of runs trained before inference.block_sync")


#: ``inference.block_sync`` of the Gibbs drivers
BLOCK_SYNC_OPTION = Option("choice", "sweep", choices=("sweep", "epoch"), nullable=True,
                           help="partitioned schedule: sweep = each doc block carries its own "
                                "n_k through the sweep and waits only for the two tasks before "
                                "it on its documents and its words (a slow thread holds up "
                                "one task, not every epoch); epoch = every block takes n_k "
                                "afresh at each epoch and all wait for the epoch's end (runs "
                                "trained before this key; null = epoch)")


#: the options of ``gibbs`` (dmr-sem shares some)
GIBBS_OPTIONS = {
    "burn_in": Option("int", None, low=0, nullable=True,
                      help="sweeps before samples are saved (default: half the iterations)"),
    "thin": Option("int", None, low=1, nullable=True,
                   help="sweeps between saved samples (default: 10 samples after burn-in)"),
    "sparse": Option("bool", True, auto=True,
                     help="SparseLDA sampler (exact); false = dense O(K); auto = chosen "
                          "before every sweep from the counts (see sparse_sweep)"),
    "sampler": Option("choice", "auto", choices=("sparse", "dense", "mh", "warp", "auto"),
                      nullable=True,
                      help="sparse = SparseLDA, dense = dense O(K), mh = Metropolis-Hastings "
                           "O(1) per token (approximate per sweep), warp = Metropolis-"
                           "Hastings in WarpLDA's order: O(1) per token reading one word's "
                           "or one document's counts at a time, exact (docs/algorithms.md "
                           "§2.9); auto (gibbs' default) = warp "
                           f"from K = {WARP_FROM_K} (dmr-sem: mh from K = {MH_FROM_K}), "
                           "else as inference.sparse; null = as inference.sparse (the "
                           "default of runs trained before auto)"),
    # null defaults, so that runs saved before these keys existed resume unchanged
    "mh_steps": Option("int", None, low=1, nullable=True,
                       help="mh, warp: cycles of a word and a document proposal per "
                            f"token (null: {MH_STEPS})"),
    "mh_rebuild": Option("int", None, low=1, high=MAX_REBUILD, nullable=True,
                         help="mh: sweeps between rebuilds of the word proposal's tables "
                              f"(null: {MH_REBUILD})"),
    "chunks": CHUNKS_OPTION,
    "blocks": BLOCKS_OPTION,
    "block_sync": BLOCK_SYNC_OPTION,
    "optimize_interval": Option("int", 20, low=1,
                                help="sweeps between alpha updates when model.alpha is auto"),
    "optimize_burn_in": Option("int", 50, low=0,
                               help="sweeps before the first alpha update"),
}


@register
class GibbsDriver(GrowMixin, GibbsClusterMixin, SampledDriver):
    """Collapsed Gibbs sampling; one step is one sweep over the training corpus.

    The template of the sweep-based samplers: a subclass with another document prior (DMR)
    gives the prior of a sweep (:meth:`sweep_prior`), what happens before and after it
    (:meth:`before_sweep`, :meth:`after_sweep`: prior updates) and the state it starts from
    (:meth:`new_state`)."""

    name = "gibbs"
    traits = GIBBS_TRAITS
    STATE = CountState
    WARP = True                 # inference.sampler: auto may pick WarpLDA (one prior only)
    OPTIONS = GIBBS_OPTIONS

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        resolve_sample_schedule(data["inference"], where)
        check_schedule(data, where, cls.WARP)

    MEMORY_FIX = ("choose inference.sampler: warp (no K x V or D x K arrays), set "
                  "training.eval_every: 0 (no phi-hat during training)")

    @classmethod
    def memory_arrays(cls, data: dict, counts: dict) -> list[tuple[str, tuple[int, ...], int]]:
        """The chain's arrays as the representation the config picks allocates them: z and
        its own (:meth:`GibbsCounts.chain_arrays`); and what an in-training evaluation adds
        at its peak: phi-hat (V, K) float64 (unless it scores from non-zero counts), the rows
        of phi-hat of the curve documents' words the fold-in copies, and their theta-hat.
        Checkpoints and samples are written from the arrays themselves, without a copy."""
        inference, model, evaluation = data["inference"], data["model"], data["evaluation"]
        K, V = int(model["topics"]), counts["vocabulary"]
        D, N = counts["train_documents"], counts["train_tokens"]
        representation = counts_class(inference, K, cls.WARP, model.get("family", "lda"))
        arrays = [("topic of every token", (N,), 4),
                  *representation.chain_arrays(data, K, V, D, N)]
        test_docs = counts["test_documents"]
        if data["training"].get("eval_every") and test_docs:
            curve = evaluation.get("curve_docs")
            docs = test_docs if curve is None else min(int(curve), test_docs)
            tokens = counts["test_observed_tokens"] * docs // test_docs
            if representation.PHI_HAT:  # one the fold-in samples with, one mixed with theta
                arrays.append(("phi-hat", (2, V, K), 8))
                arrays.append(("phi-hat of the curve's words", (min(V, tokens), K), 8))
            arrays.append(("theta-hat of the curve", (docs, K), 8))
        return arrays

    @classmethod
    def resume_config(cls, config, arrays: dict, saved: dict):
        """The Gibbs samplers' resume rules, for runs trained before a default changed
        (:mod:`topictk.inference.gibbs.resume_rules`)."""
        return resume_rules.keep_saved_settings(
            config, arrays, saved,
            lambda c, a: counts_class(c.inference, c.model.topics, cls.WARP).reads(a),
            lambda c: resolved_sampler(c.inference, c.model.topics, False))

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.doc_ptr, self.words = self.token_view
        self.counts = count_representation(config, self.doc_ptr, self.words, self.V,
                                           self.threads, self.WARP, self.synced,
                                           vocab=store.vocab)
        self.bounds, self.n_chunks = self.counts.layout.bounds, self.counts.layout.n_chunks
        self.STATE = self.counts.state_class(type(self).STATE)
        self.cluster = None         # the Dask cluster the shards sweep on (use_cluster)

    # ------------------------------------------------------------------ state
    def init_state(self) -> CountState:
        """Every token's topic uniform from the init stream (§2.2), counts to match."""
        state = self.new_state(*self.counts.initial(self.streams.persistent(keys.INIT)))
        return self.counts.started(state)

    def new_state(self, z, ndk, nkw, nk) -> CountState:
        alpha = resolve_alpha(self.config.model.alpha, self.K)
        return self.STATE(z=z, ndk=ndk, nkw=nkw, nk=nk, alpha=alpha,
                          beta=float(self.config.model.beta))

    # ------------------------------------------------------------------- step
    def sweep_prior(self, state: CountState) -> np.ndarray:
        """The (1, K) or (D, K) Dirichlet prior of theta the sweep samples with."""
        return np.ascontiguousarray(state.alpha.reshape(1, -1))

    def before_sweep(self, state: CountState, sweep: int) -> dict:
        """Updates due before sweep ``sweep`` (1-based); returns what to log."""
        return {}

    def after_sweep(self, state: CountState) -> None:
        """alpha's fixed-point update (§2.5) every optimize_interval sweeps after
        optimize_burn_in, when model.alpha is auto."""
        opts = self.config.inference
        if (self.config.model.alpha == "auto" and state.step > opts.optimize_burn_in
                and state.step % opts.optimize_interval == 0):
            # a worker lost while ndk is brought back: the sweeps redone stop short of this
            # update, which is made here (see _recover)
            previous, self._updating = self._updating, True
            try:
                alpha = self.counts.learnt_alpha(state)
            finally:
                self._updating = previous
            state.alpha = alpha

    def step(self, state: CountState, t: int) -> StepInfo:
        """Sweep t + 1: every shard (doc block, or AD-LDA chunk) samples its documents with
        its own stream (§2.8, §2.4), here or on the cluster."""
        extra = self.before_sweep(state, t + 1)
        chunk_streams = self.streams.chunk_streams((3,), self.n_chunks, persistent=True)
        if self.remote is not None:
            fallbacks, ran = self._remote_sweep(state, chunk_streams)
        else:
            fallbacks, ran = self.counts.sweep(state, self.sweep_prior(state), chunk_streams,
                                               self.streams, self.threads)
        state.step = t + 1
        self.global_draws(state)
        self.after_sweep(state)
        opts = self.config.inference
        collect = (state.step > opts.burn_in and (state.step - opts.burn_in) % opts.thin == 0)
        # the sampler that ran the sweep, and what the representation reports of its state
        extra.update(fallbacks=fallbacks, sampler=ran, **self.counts.metrics(state))
        return StepInfo(tokens=self.n_tokens, documents=self.n_docs, collect_sample=collect,
                        extra=extra)

    # ------------------------------------------------------------ what is read
    def state_to_arrays(self, state: CountState) -> tuple[dict, dict[str, np.ndarray]]:
        return super().state_to_arrays(self.synced(state))

    def topic_word(self, state: CountState) -> np.ndarray:
        return self.counts.topic_word(state)

    def ranked_words(self, state: CountState,
                     n: int) -> tuple[np.ndarray, np.ndarray] | None:
        return self.counts.ranked_words(state, n)

    def listed_topics(self, state: CountState) -> np.ndarray | None:
        return self.counts.listed_topics(state)

    def topic_weights(self, state: CountState) -> dict[str, np.ndarray] | None:
        return self.counts.topic_weights(state)

    def objective(self, state: CountState) -> float:
        """Collapsed log joint ln p(w, z | alpha, beta) per token (§1.3)."""
        return self.counts.objective(state)

    def sample(self, state: CountState) -> dict[str, np.ndarray]:
        """The counts a sample keeps (:meth:`GibbsCounts.sample`): n_kw, n_k, alpha, and n_dk
        for Protocol B."""
        return self.counts.sample(state, self.store.train_heldout() is not None)

    def fold_in(self, state: CountState, documents, plan, *, prior=None,
                sample: dict | None = None) -> np.ndarray:
        """With ``evaluation.fold_in: mh``, by MH (§2.7) from the counts of ``sample`` (or of
        the state), O(mh_steps) per token; else by the Gibbs fold-in, from the representation's
        own counts when it folds in without phi-hat (:meth:`GibbsCounts.fold_in`)."""
        if prior is None:
            if sample is not None:
                raise ValueError("a fold-in with a saved sample needs the documents' prior")
            prior = self.document_prior(state, None)
        fixed = fixed_point_settings(self.config)
        if fixed is not None:
            phi = self.topic_word(state).T if sample is None else self.sample_phi(state, sample)
            return fixed_point_fold_in(phi, prior, documents, plan.active, tol=fixed[0],
                                       max_iterations=fixed[1], threads=plan.threads)
        if getattr(self.config.evaluation, "fold_in", "gibbs") == "mh":
            nk = state.nk if sample is None else sample["nk"]
            nkw = (self.counted(state).nkw if sample is None
                   else dense_counts(sample, "nkw", self.K))
            return mh_fold_in(nkw, nk, state.beta, prior, documents.doc_ptr, documents.words,
                              plan, self.counts.steps, self.counts.overlay)
        theta = self.counts.fold_in(state, sample, prior, documents, plan)
        if theta is None:
            theta = super().fold_in(state, documents, plan, prior=prior, sample=sample)
        return theta

    # ---------------------------------------------------------------- scoring
    def sample_phi(self, state: CountState, sample: dict) -> np.ndarray:
        return self.counts.sample_phi(sample, state.beta)

    def sample_prior(self, state: CountState, sample: dict, documents: str) -> np.ndarray:
        return sample["alpha"]

    def averaged_fold_in(self, state: CountState, samples: list[dict] | None, docs,
                         documents: str, pass_index: int) -> np.ndarray:
        """Samples kept as non-zero counts (a WarpLDA chain's, §2.9) are scored by the Gibbs
        fold-in without forming phi-hat (:func:`topictk.inference.gibbs.warp.sparse_fold_in`): the
        numbers of the dense path, in memory O(non-zeros + K) instead of O(V K)."""
        samples = self.scored_samples(state, samples)
        scored = None
        if getattr(self.config.evaluation, "fold_in", "gibbs") == "gibbs":
            scored = self.counts.averaged_fold_in(
                samples, state.beta, lambda s: self.sample_prior(state, s, documents), docs,
                lambda: evaluation_plan(self, docs, pass_index))
        if scored is None:
            scored = super().averaged_fold_in(state, samples, docs, documents, pass_index)
        return scored

    def train_heldout_probabilities(self, state: CountState, samples,
                                    heldout) -> np.ndarray:
        """Protocol B (§11.2): p-hat = (1/S) sum_s sum_k theta-hat^s_dk phi-hat^s_kw with
        theta-hat^s = (n_dk + alpha_d)/(N_d + alpha_d.) (TNW 2007 eq. 20), over the saved
        samples that hold n_dk (else the current state's, which holds them on a store with
        Protocol B); from a sample's non-zero counts when it keeps those (§2.9)."""
        samples = [s for s in (samples or []) if "ndk" in s or "ndk_ptr" in s] or [
            self.sample(state)]
        total = np.zeros(np.asarray(heldout.indices).size)
        for s in samples:
            total += self._sample_mixture(state, s, heldout)
        return total / len(samples)

    def _sample_mixture(self, state: CountState, sample: dict, heldout) -> np.ndarray:
        """p-hat of Protocol B's held-out entries under one sample."""
        alpha = self.sample_prior(state, sample, "train")
        if "ndk_ptr" in sample and "nkw_ptr" in sample and alpha.ndim == 1:
            return sparse_mixture(sample, state.beta, alpha, heldout, self.threads,
                                  self.counts.overlay)
        ndk = dense_counts(sample, "ndk", self.K).astype(np.float64)
        alpha_sum = alpha.sum() if alpha.ndim == 1 else alpha.sum(axis=1, keepdims=True)
        theta = (ndk + alpha) / (ndk.sum(axis=1, keepdims=True) + alpha_sum)
        return mixture_probabilities(heldout, theta, self.sample_phi(state, sample),
                                     self.threads)

    def state_sizes(self) -> dict:
        return {**super().state_sizes(), "M": self.counts.steps, **self.counts.sizes()}

    def check_resumable(self, state: CountState) -> None:
        self.counts.check_resumable(state)

    def check_restored(self, state: CountState) -> None:
        self.counts.check_restored(state)

    def check_state(self, state: CountState) -> None:
        if not np.all(np.isfinite(state.alpha)):
            raise NumericalError(f"alpha became non-finite at step {state.step}")
