"""Dirichlet-multinomial regression topic model (Mimno & McCallum 2008): topics whose document
prior depends on document metadata, alpha_dk = exp(x_d^T nu_k). docs/algorithms.md §9.

Two training algorithms:

* ``dmr-sem`` -- stochastic EM (§9.2): collapsed Gibbs sweeps with a prior per document (the
  exact samplers of :func:`topictk.inference.gibbs._gibbs.gibbs_sweep` with the document's prior,
  or with ``sampler: mh`` the Metropolis-Hastings sampler of §2.7, whose document proposal
  then carries the document's prior in its ratio; AD-LDA chunks for threads). §9.2 prefers
  the dense sampler because the smoothing bucket s of SparseLDA depends on the document;
  rebuilding s and the coefficients at each document start costs O(K) per document, against
  O(K) per token for the dense draw, so the sparse sweep is the faster one once the topics are
  sparse (NIPS, K = 50: 0.12 s against 0.20 s per sweep), but not while the words' topic lists
  are long (the first sweeps; about 225 of a 300-sweep run on poliblog at K = 20).
  ``sparse: auto`` (the default) picks the sampler before each sweep from the counts
  (:func:`topictk.inference.gibbs.counts.sparse_sweep`); true or false fix it. Every
  ``optimize_interval`` sweeps after ``optimize_burn_in`` the weights nu maximise the Polya log
  likelihood of the current topic counts plus the Gaussian prior, by L-BFGS (scipy, warm
  start, one BLAS thread). Each objective evaluation is one kernel call: per document
  (O(K nnz(x_d)), special functions only where n_dk > 0), or, when documents share feature
  rows as with categorical metadata, per distinct row from histograms of its documents'
  counts (:class:`PolyaObjective`). NumPy twins: ``tests/reference/dmr.py``.
* ``dmr-sgrld`` -- the DMR report's variant (§9.3): SGRLD for the expanded-mean topics (§7) and
  SGLD for nu, from the same local Gibbs samples of each mini-batch (kernel
  :func:`topictk.inference._minibatch.local_gibbs`, which also sums the gradient factor g_dk
  over the kept sweeps). ``nu_burn_in`` holds nu at its start for the first updates, as
  ``optimize_burn_in`` does for dmr-sem (default 0: §9.3 moves nu from the first update).

``x_d`` comes from the store's ``train_features`` / ``test_features`` (``topictk prepare --meta``;
the intercept is the last feature). In Mimno & McCallum (2008) and in the DMR report nu is
called lambda. ``model.alpha`` is alpha_init: nu starts at ln(alpha_init) for the intercept and
0 elsewhere. Test documents are folded in with alpha_d = exp(x_d^T nu) (§9.4, §11.2).
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import logging
from functools import cached_property

import numpy as np
from scipy.optimize import minimize
from scipy.sparse import csr_matrix
from scipy.special import gammaln

from topictk import streams as keys
from topictk.numbering import topic_number
from topictk.config.schema import Option
from topictk.corpus.batches import gather_batch
from topictk.corpus.features import FeatureEncoding, run_encoding, run_features
from topictk.errors import ConfigError, CorpusError, CorpusUsageError, NumericalError
from topictk.inference.dmr import _dmr
from topictk.inference.base import (
    StepInfo,
    Traits,
)
from topictk.inference.gibbs.driver import (
    BLOCK_SYNC_OPTION,
    BLOCKS_OPTION,
    CHUNKS_OPTION,
    GibbsDriver,
)
from topictk.inference.minibatch import FLOOR
from topictk.inference.minibatch import local_statistics as minibatch_local_statistics
from topictk.inference.registry import register
from topictk.inference.schedules import sgmcmc_step
from topictk.inference.sgrld.driver import SGRLDDriver, sgrld_update
from topictk.state.dmr import (
    ETA_MAX,
    ETA_MIN,
    DMRCountState,
    DMRSimplexState,
    document_alpha,
    feature_products,
)
from topictk.streams import Streams

log = logging.getLogger("topictk")

LBFGS_GTOL = 1e-5        # §9.2
LBFGS_MAX_ITER = 200     # §9.2
# scipy's relative-decrease stop (ftol) would end the search long before the gradient test of
# §9.2 on a corpus-sized objective (|l| ~ 1e6); set it near machine precision so gtol decides.
LBFGS_FTOL = 1e-14


# ---------------------------------------------------------------------------------------------
# Features and the objective of §9.1 / §9.2
def training_features(store, model) -> tuple[FeatureEncoding, np.ndarray]:
    """The run's feature encoding and (D, F) training features (``model.features``), or the
    usage error that says how to have them."""
    encoding = run_encoding(store, model.features, model.spline_columns)
    X = None if encoding is None else run_features(store, encoding, model.features, "train")
    if X is None:
        raise CorpusUsageError(
            f"{store.path}: the corpus store has no document features, and model.family dmr "
            f"needs them; prepare it again with --meta FIELDS (fields of a .jsonl input, or "
            f"columns of --meta-file FILE.tsv for other inputs), e.g. 'topictk prepare INPUT "
            f"--meta-file meta.tsv --meta year,party:cat --out {store.path} --force', or, for a "
            f"store with time slices, set model.features: slice")
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.shape[1] == 0 or not np.all(X[:, -1] == 1.0):
        raise CorpusError(f"{store.path}: the last feature is not the always-1 intercept; "
                          f"prepare the corpus again with this version of topictk (--force)")
    return encoding, X


def prior_variances(n_features: int, sigma2: float, sigma2_intercept: float) -> np.ndarray:
    """sigma_f^2 for every feature (F,): ``sigma2`` for metadata, ``sigma2_intercept`` last."""
    var = np.full(n_features, float(sigma2))
    var[-1] = float(sigma2_intercept)
    return var


def initial_nu(n_topics: int, n_features: int, alpha_init: float) -> np.ndarray:
    """nu_k,intercept = ln(alpha_init), every other weight 0 (§9.2)."""
    nu = np.zeros((n_topics, n_features))
    nu[:, -1] = np.log(alpha_init)
    return nu


def feature_groups(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct feature rows of X and the index of each document's row."""
    rows, inverse = np.unique(np.asarray(X, dtype=np.float64), axis=0, return_inverse=True)
    return np.ascontiguousarray(rows), inverse.reshape(-1).astype(np.int64)


def _csr_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row pointers (int64), column indices (int32), values) of the non-zeros of X, row by row
    in column order, as the kernels take them."""
    m = csr_matrix(np.asarray(X, dtype=np.float64))
    return (m.indptr.astype(np.int64), m.indices.astype(np.int32),
            np.ascontiguousarray(m.data, dtype=np.float64))


def _histograms(cell: np.ndarray, value: np.ndarray,
                n_cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per cell, the distinct values and how many entries have each, as (cell pointers (n_cells
    + 1), values ascending within a cell (int32), counts (float64))."""
    value = np.asarray(value, dtype=np.int64)
    span = int(value.max()) + 1 if value.size else 1
    keys, counts = np.unique(np.asarray(cell, dtype=np.int64) * span + value, return_counts=True)
    ptr = np.zeros(n_cells + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // span, minlength=n_cells), out=ptr[1:])
    return ptr, (keys % span).astype(np.int32), counts.astype(np.float64)


class PolyaObjective:
    """sum_d ln p(z_d | nu) (§9.1) and its gradient (K, F) sum_d x_df g_dk for fixed features,
    topic counts and lengths:

    ln p(z_d | nu) = lnG(alpha_d.) - lnG(alpha_d. + N_d)
                     + sum_k [lnG(alpha_dk + n_dk) - lnG(alpha_dk)]
    g_dk = alpha_dk [psi(alpha_d.) - psi(alpha_d. + N_d) + psi(alpha_dk + n_dk) - psi(alpha_dk)]

    L-BFGS evaluates it many times on the same counts, so the set-up is done once, in one of two
    forms:

    * grouped, when at most half as many distinct feature rows as documents (categorical
      metadata: one row per combination of values): documents of one row share alpha_d, so
      only histograms of their counts enter, one kernel pass
      (:func:`topictk.inference.dmr._dmr.polya_objective_grouped`) in O(distinct counts);
    * per document otherwise (:func:`topictk.inference.dmr._dmr.polya_objective`): sparse feature
      rows, the gradient in fixed blocks of documents summed here in block order.

    Either result is independent of ``threads``. ``groups`` = (distinct rows, row of each
    document) as from ``np.unique(X, axis=0, return_inverse=True)``, to skip that search when
    the caller keeps it; ``grouped`` forces one form (None: by the rule above).
    """

    BLOCK_DOCS = 256

    def __init__(self, X: np.ndarray, ndk: np.ndarray, lengths: np.ndarray, threads: int = 1,
                 groups: tuple[np.ndarray, np.ndarray] | None = None,
                 grouped: bool | None = None):
        X = np.asarray(X, dtype=np.float64)
        D, F = X.shape
        ndk = np.ascontiguousarray(ndk, dtype=np.int32)
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        K = ndk.shape[1]
        if groups is None and grouped is not False:
            groups = feature_groups(X)
        if grouped is None:
            grouped = 2 * groups[0].shape[0] <= D
        self.grouped = bool(grouped)
        self.threads = int(threads)
        if self.grouped:
            rows, inverse = groups
            self.x_ptr, self.x_idx, self.x_val = _csr_rows(rows)
            G = rows.shape[0]
            d, k = np.nonzero(ndk)
            self.cell_ptr, self.cell_n, self.cell_docs = _histograms(
                inverse[d] * K + k, ndk[d, k], G * K)
            d = np.flatnonzero(lengths)
            self.len_ptr, self.len_n, self.len_docs = _histograms(inverse[d], lengths[d], G)
            self.grad_t = np.empty((F, K))
            self.scratch = np.empty(2 * K)
        else:
            self.x_ptr, self.x_idx, self.x_val = _csr_rows(X)
            self.ndk, self.lengths = ndk, lengths
            blocks = -(-D // self.BLOCK_DOCS)
            self.values = np.empty(D)
            self.grad_t = np.empty((blocks, F, K))
            self.scratch = np.empty((blocks, 2 * K))

    def __call__(self, nu: np.ndarray) -> tuple[float, np.ndarray]:
        nu_t = np.ascontiguousarray(np.asarray(nu, dtype=np.float64).T)
        if self.grouped:
            value = _dmr.polya_objective_grouped(
                self.x_ptr, self.x_idx, self.x_val, nu_t, self.cell_ptr, self.cell_n,
                self.cell_docs, self.len_ptr, self.len_n, self.len_docs, ETA_MIN, ETA_MAX,
                self.grad_t, self.scratch)
            return float(value), np.ascontiguousarray(self.grad_t.T)
        _dmr.polya_objective(self.x_ptr, self.x_idx, self.x_val, nu_t, self.ndk,
                             self.lengths, ETA_MIN, ETA_MAX, self.values, self.grad_t,
                             self.scratch, self.BLOCK_DOCS, self.threads)
        return float(self.values.sum()), np.ascontiguousarray(self.grad_t.sum(axis=0).T)

    def penalised(self, nu: np.ndarray, variances: np.ndarray,
                  mean: float = 0.0) -> tuple[float, np.ndarray]:
        """The likelihood plus the Gaussian prior of §9.2 (l(nu) of :func:`nu_objective`)."""
        value, grad = self(nu)
        diff = nu - mean
        return (value - float(np.sum(diff * diff / (2.0 * variances))),
                grad - diff / variances)


def polya_log_likelihood(nu: np.ndarray, X: np.ndarray, ndk: np.ndarray,
                         lengths: np.ndarray, threads: int = 1,
                         grouped: bool | None = None) -> tuple[float, np.ndarray]:
    """sum_d ln p(z_d | nu) and its gradient, once (see :class:`PolyaObjective`)."""
    return PolyaObjective(X, ndk, lengths, threads, grouped=grouped)(nu)


def nu_objective(nu: np.ndarray, X: np.ndarray, ndk: np.ndarray, lengths: np.ndarray,
                 variances: np.ndarray, mean: float = 0.0,
                 threads: int = 1) -> tuple[float, np.ndarray]:
    """l(nu) = sum_d ln p(z_d | nu) - sum_kf (nu_kf - mu_f)^2 / (2 sigma_f^2) and its gradient."""
    return PolyaObjective(X, ndk, lengths, threads).penalised(nu, variances, mean)


_BLAS_HANDLES: list | None = None


def _openblas_thread_handles() -> list:
    """(get, set) thread-count functions of every OpenBLAS loaded in this process (Linux:
    found through /proc/self/maps; elsewhere none)."""
    global _BLAS_HANDLES
    if _BLAS_HANDLES is None:
        _BLAS_HANDLES = []
        try:
            with open("/proc/self/maps", encoding="utf-8") as f:
                paths = sorted({line.split()[-1] for line in f
                                if "openblas" in line.lower() and line.split()[-1][:1] == "/"})
        except OSError:
            paths = []
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for prefix in ("openblas", "scipy_openblas"):
                for suffix in ("", "64_"):
                    get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                    set_ = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                    if get is not None and set_ is not None:
                        get.restype = ctypes.c_int
                        set_.argtypes = [ctypes.c_int]
                        _BLAS_HANDLES.append((get, set_))
    return _BLAS_HANDLES


@contextlib.contextmanager
def single_blas_thread():
    """Run the block with one BLAS thread. scipy's L-BFGS-B calls BLAS on (2m x 2m) matrices,
    far too small to gain from threads: with OpenBLAS's default threads it ran 13 times slower
    on a busy 2-core machine; one thread also keeps its roundings independent of the machine."""
    handles = _openblas_thread_handles()
    saved = [get() for get, _ in handles]
    for _, set_ in handles:
        set_(1)
    try:
        yield
    finally:
        for (_, set_), n in zip(handles, saved):
            set_(n)


def optimize_nu(nu: np.ndarray, X: np.ndarray, ndk: np.ndarray, lengths: np.ndarray,
                variances: np.ndarray, threads: int = 1,
                groups: tuple[np.ndarray, np.ndarray] | None = None,
                grouped: bool | None = None) -> tuple[np.ndarray, dict]:
    """Maximise l(nu) by L-BFGS from ``nu`` (warm start; gtol 1e-5, <= 200 iterations, §9.2).
    ``groups`` and ``grouped``: see :class:`PolyaObjective`."""
    shape = nu.shape
    polya = PolyaObjective(X, ndk, lengths, threads, groups=groups, grouped=grouped)

    def negative(flat):
        value, grad = polya.penalised(flat.reshape(shape), variances)
        return -value, -grad.ravel()

    with single_blas_thread():
        result = minimize(negative, np.asarray(nu, dtype=np.float64).ravel(), jac=True,
                          method="L-BFGS-B",
                          options={"gtol": LBFGS_GTOL, "maxiter": LBFGS_MAX_ITER,
                                   "ftol": LBFGS_FTOL})
    new = np.ascontiguousarray(result.x.reshape(shape))
    if not np.all(np.isfinite(new)):
        raise NumericalError("nu became non-finite in the L-BFGS update; lower "
                             "inference.sigma2 (a tighter prior)")
    return new, {"lbfgs_iterations": int(result.nit), "nu_objective": float(-result.fun)}


def dmr_options() -> dict[str, Option]:
    """Prior options both DMR algorithms share (§9.2, §9.3)."""
    return {
        "sigma2": Option("float", 0.5, low=0, low_open=True,
                         help="prior variance of the metadata weights nu (Mimno & McCallum's "
                              "MALLET default)"),
        "sigma2_intercept": Option("float", 100.0, low=0, low_open=True,
                                   help="prior variance of the intercept weights"),
    }


def feature_table(nu: np.ndarray, names: list[str], n: int) -> list[list[dict]]:
    """Per topic, the ``n`` metadata features (intercept excluded) with the largest nu_kf:
    [{"feature", "weight", "contrast"}], contrast = nu_kf - mean_j nu_jf (the identifiable
    part; a common shift of column f only scales alpha_d.)."""
    F = nu.shape[1]
    meta = np.arange(F - 1)
    contrast = nu - nu.mean(axis=0, keepdims=True)
    table = []
    for k in range(nu.shape[0]):
        order = meta[np.argsort(-nu[k, meta], kind="stable")][:n]
        table.append([{"feature": names[f] if f < len(names) else f"x{f}",
                       "weight": float(nu[k, f]), "contrast": float(contrast[k, f])}
                      for f in order])
    return table


# ---------------------------------------------------------------------------------------------
class DMRPriorMixin:
    """What both DMR drivers share: the per-document prior and nu's feature table."""

    @staticmethod
    def dmr_traits(base: Traits, paper: str) -> Traits:
        """The traits of a DMR driver extending ``base``: a prior per document from its
        metadata, learnt through nu, so model.alpha is its start alpha_init, never auto; topics
        list their features; the Gibbs fold-ins of evaluate and infer on a Dask cluster with
        each block's prior rows; training there only when the driver says so."""
        return base.but(family="dmr", families=(), paper=paper, features=True,
                        alpha_auto=False, cluster=False, cluster_fold_in=True,
                        report={"features"})

    def document_prior(self, state, features: np.ndarray | None) -> np.ndarray:
        """alpha_d = exp(x_d^T nu) of new documents (``topictk infer``)."""
        return document_alpha(features, state.nu)

    def features_of(self, documents: str) -> np.ndarray:
        """The feature rows of the ``"train"`` or ``"test"`` documents (``model.features``)."""
        return self.X if documents == "train" else self._test_features

    @cached_property
    def _test_features(self) -> np.ndarray:
        """The test documents' rows, made once: every sample's score reads them."""
        return np.ascontiguousarray(run_features(self.store, self.encoding,
                                                 self.config.model.features, "test"),
                                    dtype=np.float64)

    def feature_encoding(self) -> FeatureEncoding:
        """How new documents' metadata become this run's features (``model.features``)."""
        return self.encoding

    def feature_names(self) -> list[str]:
        """The name of every feature: as the store records its own (``model.features:
        store``), else as the encoding of its time names them."""
        if self.config.model.features == "store":
            return self.store.feature_names
        return self.encoding.names

    def feature_table(self, state, n: int) -> list[list[dict]]:
        """Per topic, the ``n`` metadata features with the largest nu_kf (``topictk topics``)."""
        return feature_table(state.nu, self.feature_names(), n)


@register
class DMRSEMDriver(DMRPriorMixin, GibbsDriver):
    """DMR by stochastic EM: collapsed Gibbs sweeps with each document's prior
    alpha_d = exp(x_d^T nu), and nu updated by L-BFGS before a sweep when due (§9.2)."""

    name = "dmr-sem"
    # on a Dask cluster as Gibbs LDA runs there, each shard with its documents' prior rows
    traits = DMRPriorMixin.dmr_traits(GibbsDriver.traits, "Mimno & McCallum 2008").but(
        add_documents=("dmr",), cluster=True)
    STATE = DMRCountState
    WARP = False            # a prior per document: auto never picks WarpLDA (§2.9)
    OPTIONS = {
        "burn_in": Option("int", None, low=0, nullable=True,
                          help="sweeps before samples are saved (default: half the iterations)"),
        "thin": Option("int", None, low=1, nullable=True,
                       help="sweeps between saved samples (default: 10 samples after burn-in)"),
        "chunks": CHUNKS_OPTION,
        "blocks": BLOCKS_OPTION,
        "block_sync": BLOCK_SYNC_OPTION,
        "sparse": Option("bool", "auto", auto=True,
                         help="true = SparseLDA buckets with the document's prior (exact); "
                              "false = the dense sampler of §9.2; auto = chosen before every "
                              "sweep from the counts (dense while the words' topic lists are "
                              "long, as early in a run or at small K)"),
        # null by default: auto's choice at large K is measured for LDA only
        "sampler": dataclasses.replace(GibbsDriver.OPTIONS["sampler"], default=None),
        "mh_steps": GibbsDriver.OPTIONS["mh_steps"],
        "mh_rebuild": GibbsDriver.OPTIONS["mh_rebuild"],
        "optimize_interval": Option("int", 50, low=1, help="sweeps between nu updates"),
        "optimize_burn_in": Option("int", 100, low=0,
                                   help="sweeps before the first nu update"),
        **dmr_options(),
    }

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        inf = data["inference"]
        if inf.get("sampler") == "warp":
            raise ConfigError(f"inference.sampler: warp draws its document proposals from one "
                              f"prior shared by every document, which dmr-sem does not have; "
                              f"choose inference.sampler: mh, sparse or dense ({where})")
        super().check_config(data, where)      # the sample schedule
        # nu is updated before sweep s when s > optimize_burn_in and s % optimize_interval == 0
        first = (inf["optimize_burn_in"] // inf["optimize_interval"] + 1) * inf["optimize_interval"]
        if first > inf["iterations"]:   # allowed: a run of DMR with nu fixed at its start
            log.warning("inference.optimize_burn_in = %d with inference.optimize_interval = %d: "
                        "the first nu update would come before sweep %d, after "
                        "inference.iterations = %d, so nu is never optimised and every "
                        "document keeps the prior model.alpha; lower "
                        "inference.optimize_burn_in or inference.optimize_interval, or raise "
                        "inference.iterations, to learn from the metadata (%s)",
                        inf["optimize_burn_in"], inf["optimize_interval"], first,
                        inf["iterations"], where)

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.encoding, self.X = training_features(store, config.model)
        self.groups = feature_groups(self.X)     # the nu objective's grouped form (see there)
        self.lengths = np.diff(self.doc_ptr)
        opts = config.inference
        self.variances = prior_variances(self.X.shape[1], opts.sigma2, opts.sigma2_intercept)
        self._alpha_cache: tuple[np.ndarray, np.ndarray] | None = None

    def grow_state(self, old: DMRCountState, added) -> DMRCountState:
        """Added documents as collapsed Gibbs LDA adds them, folded in with their own prior
        exp(x_d^T nu) (:mod:`topictk.inference.gibbs.grow`); nu and its update count go on."""
        state = super().grow_state(old, added)
        state.nu, state.optimizations = np.array(old.nu), int(old.optimizations)
        state.alpha = np.exp(state.nu[:, -1])
        return state

    def new_state(self, z, ndk, nkw, nk) -> DMRCountState:
        """nu from alpha_init (§9.2)."""
        nu = initial_nu(self.K, self.X.shape[1], float(self.config.model.alpha))
        return DMRCountState(z=z, ndk=ndk, nkw=nkw, nk=nk, alpha=np.exp(nu[:, -1]),
                             beta=float(self.config.model.beta), nu=nu)

    def document_alpha(self, state) -> np.ndarray:
        """(D, K) alpha_d = exp(x_d^T nu) of the training documents, cached until nu changes
        (only every ``optimize_interval`` sweeps)."""
        cached = self._alpha_cache
        if cached is None or not np.array_equal(cached[0], state.nu):
            cached = (state.nu.copy(), document_alpha(self.X, state.nu))
            self._alpha_cache = cached
        return cached[1]

    def sweep_prior(self, state: DMRCountState) -> np.ndarray:
        return self.document_alpha(state)

    def before_sweep(self, state: DMRCountState, sweep: int) -> dict:
        """nu's L-BFGS update before every optimize_interval-th sweep after optimize_burn_in."""
        opts = self.config.inference
        if sweep > opts.optimize_burn_in and sweep % opts.optimize_interval == 0:
            state = self.synced(state)          # n_dk from a cluster's shards
            state.nu, info = optimize_nu(state.nu, self.X, state.ndk, self.lengths,
                                         self.variances, self.threads, groups=self.groups)
            state.alpha = np.exp(state.nu[:, -1])
            state.optimizations += 1
            return info
        return {}

    def after_sweep(self, state: DMRCountState) -> None:
        """Nothing: the prior moves through nu, before a sweep."""

    def objective(self, state: DMRCountState) -> float:
        """Collapsed log joint ln p(w, z | nu, beta) per token (§1.3 with alpha_d, §9.1)."""
        state = self.synced(state)              # n_dk from a cluster's shards
        doc_part, _ = PolyaObjective(self.X, state.ndk, self.lengths, self.threads,
                                     groups=self.groups)(state.nu)
        beta, V = state.beta, self.V
        nz = state.nkw[state.nkw > 0]
        topic_part = (self.K * gammaln(V * beta) - gammaln(V * beta + state.nk).sum()
                      + (gammaln(nz + beta) - gammaln(beta)).sum())
        return float((doc_part + topic_part) / max(self.n_tokens, 1))

    def sample(self, state: DMRCountState) -> dict[str, np.ndarray]:
        arrays = {"nkw": state.nkw.copy(), "nk": state.nk.copy(), "nu": state.nu.copy()}
        if self.store.train_heldout() is not None:   # Protocol B scores with n_dk per sample
            arrays["ndk"] = state.ndk.copy()
        return arrays

    def sample_prior(self, state: DMRCountState, sample: dict, documents: str) -> np.ndarray:
        """alpha_d = exp(x_d^T nu) of the sample's nu for the test or training documents."""
        return document_alpha(self.features_of(documents), sample["nu"])

    def state_sizes(self) -> dict:
        return {**super().state_sizes(), "F": self.X.shape[1]}

    def check_state(self, state: DMRCountState) -> None:
        if not np.all(np.isfinite(state.nu)):
            raise NumericalError(f"nu became non-finite at step {state.step}")


# ---------------------------------------------------------------------------------------------
def _nu_step_options() -> dict[str, Option]:
    return {
        "a": Option("float", None, low=0, low_open=True, nullable=True,
                    help="epsilon^nu_t scale a_nu (default 0.1 / D: the nu-gradient grows "
                         "with the corpus size)"),
        "b": Option("float", 1000.0, low=0, low_open=True, help="epsilon^nu_t offset b_nu"),
        "c": Option("float", 0.55, low=0.5, high=1, low_open=True,
                    help="epsilon^nu_t decay c_nu in (0.5, 1]"),
    }


@register
class DMRSGRLDDriver(DMRPriorMixin, SGRLDDriver):
    """DMR by SGRLD for the topics and SGLD for nu; one step is one mini-batch update (§9.3)."""

    name = "dmr-sgrld"
    # the local chains of a mini-batch on a Dask cluster as sgrld's, with the batch's prior rows
    traits = DMRPriorMixin.dmr_traits(SGRLDDriver.traits,
                                      "Mimno & McCallum 2008; Patterson & Teh 2013").but(
        add_documents=("dmr",), cluster=True)
    STATE = DMRSimplexState
    OPTIONS = {**SGRLDDriver.OPTIONS, "nu_step": _nu_step_options(), **dmr_options(),
               "nu_burn_in": Option("int", 0, low=0,
                                    help="updates with nu held at its start while the topics "
                                         "form, as dmr-sem's optimize_burn_in (0 = from the "
                                         "first update, §9.3)")}

    # sgrld_update normalises phi_hat again beside the step's phi
    UPDATE_ARRAYS = SGRLDDriver.UPDATE_ARRAYS + 1

    def grow_state(self, old: DMRSimplexState, added) -> DMRSimplexState:
        """Added documents streamed in as SGRLD streams them (its ``grow_state``); nu goes
        on."""
        grown = super().grow_state(old, added)
        return DMRSimplexState(phi_hat=grown.phi_hat, alpha=np.exp(old.nu[:, -1]),
                               beta=grown.beta, step=grown.step,
                               permutation=grown.permutation, floored=grown.floored,
                               nu=np.array(old.nu))

    def continued_settings(self, state: DMRSimplexState) -> dict:
        """As SGRLD's, and nu's step scale a_nu (null: 0.1 / D) kept at this run's value."""
        settings = super().continued_settings(state)
        if self.config.inference.nu_step["a"] is None:
            settings["inference.nu_step.a"] = self.a_nu
        return settings

    @classmethod
    def memory_priors(cls, docs: int, K: int) -> list:
        """alpha_d = exp(x_d^T nu) of every document, and a batch's gradient terms."""
        return [("document priors and gradient terms", (2, docs, K), 8)]

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        super().check_config(data, where)
        inf = data["inference"]
        if inf["nu_burn_in"] >= inf["iterations"]:
            log.warning("inference.nu_burn_in = %d with inference.iterations = %d: nu is never "
                        "sampled and every document keeps the prior model.alpha; lower "
                        "inference.nu_burn_in to learn from the metadata (%s)",
                        inf["nu_burn_in"], inf["iterations"], where)

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        self.encoding, self.X = training_features(store, config.model)
        super().__init__(config, store, threads, streams=streams)
        opts = config.inference
        self.variances = prior_variances(self.X.shape[1], opts.sigma2, opts.sigma2_intercept)
        a_nu = opts.nu_step["a"]
        self.a_nu = 0.1 / self.n_docs if a_nu is None else float(a_nu)
        self.feature_bound = np.abs(self.X).max(axis=0) if self.X.size else np.zeros(0)

    def init_state(self) -> DMRSimplexState:
        """phi_hat ~ Gam(1, 1) (init stream, §7.5); nu from alpha_init (§9.2)."""
        init = np.random.Generator(self.streams.persistent(keys.INIT))
        phi_hat = init.standard_gamma(1.0, size=(self.V, self.K))
        np.maximum(phi_hat, FLOOR, out=phi_hat)
        if self.seeds is not None:      # seed words start in their topics (§2.14)
            self.seeds.add_to(phi_hat)
        nu = initial_nu(self.K, self.X.shape[1], float(self.config.model.alpha))
        return DMRSimplexState(phi_hat=phi_hat, alpha=np.exp(nu[:, -1]),
                               beta=float(self.config.model.beta), nu=nu)

    def local_statistics(self, batch, phi: np.ndarray, alpha: np.ndarray, t: int,
                         gradient: bool = True) -> tuple[np.ndarray, np.ndarray | None, int]:
        """E[n_kw] (V_B, K) and g-bar (B, K), the kept-sweep averages of the local chains (g-bar
        None without ``gradient``: the draws are the same), here or on the cluster."""
        nbar_w, gbar, fallbacks = minibatch_local_statistics(self, batch, phi, alpha, t,
                                                             gradient=gradient)
        return nbar_w, gbar if gradient else None, fallbacks

    def step(self, state: DMRSimplexState, t: int) -> StepInfo:
        inf = self.config.inference
        main = np.random.Generator(self.streams.persistent(keys.MAIN))
        ids, state.permutation = self.schedule.batch_ids(t, state.permutation, main)
        batch = gather_batch(self.doc_ptr, self.words, ids)
        X_batch = self.X[ids]
        phi = state.phi()
        moves_nu = t >= inf.nu_burn_in
        nbar_w, gbar, fallbacks = self.local_statistics(
            batch, phi[batch.vocab], document_alpha(X_batch, state.nu), t, gradient=moves_nu)
        scale = self.n_docs / ids.size                              # R_B
        # topics: SGRLD (§7.3); normals for phi_hat first, then for nu (main stream)
        eps = sgmcmc_step(inf.step["a"], inf.step["b"], inf.step["c"], t)
        noise = main.standard_normal(size=state.phi_hat.shape)
        state.phi_hat, n_floored = sgrld_update(state.phi_hat, nbar_w, batch.vocab, state.beta,
                                                eps, scale, noise, seeds=self.seeds)
        # weights: SGLD, G = -(nu - mu)/sigma^2 + R_B sum_d x_d g-bar_d (§9.3), once the
        # first nu_burn_in updates are over (the step schedule keeps counting from update 0)
        eps_nu = 0.0
        if moves_nu:
            eps_nu = sgmcmc_step(self.a_nu, inf.nu_step["b"], inf.nu_step["c"], t)
            gradient = -state.nu / self.variances + scale * feature_products(gbar, X_batch)
            noise_nu = main.standard_normal(size=state.nu.shape)
            state.nu = state.nu + eps_nu * gradient + np.sqrt(2.0 * eps_nu) * noise_nu
        with np.errstate(over="ignore"):      # a diverged nu is reported by check_state
            state.alpha = np.exp(state.nu[:, -1])
        state.floored += n_floored
        state.step = t + 1
        return StepInfo(tokens=batch.n_tokens, documents=int(ids.size),
                        collect_sample=state.step in self.collect_at,
                        extra={"epsilon": eps, "epsilon_nu": eps_nu, "floored": n_floored,
                               "fallbacks": fallbacks})

    def state_sizes(self) -> dict:
        return {**super().state_sizes(), "F": self.X.shape[1]}

    def check_state(self, state: DMRSimplexState) -> None:
        """Also stop when nu has run away: once x_d^T nu_k of a training document reaches the
        clip bound of the prior (alpha_dk = e^300), the SGLD steps are too large for the
        gradient and the prior no longer follows nu."""
        fix = (f"lower inference.nu_step.a (now {self.a_nu:g}; the last good checkpoint is "
               f"kept)")
        if not np.all(np.isfinite(state.nu)):
            raise NumericalError(f"nu became NaN or infinite at update {state.step}; {fix}")
        # |x_d^T nu_k| <= sum_f max_d |x_df| |nu_kf|: exact products only when that bound is hit
        bound = np.einsum("kf,f->k", np.abs(state.nu), self.feature_bound)
        if np.max(bound, initial=0.0) >= ETA_MAX:
            eta = np.abs(np.einsum("df,kf->dk", self.X, state.nu))
            if eta.size and eta.max() >= ETA_MAX:
                d, k = np.unravel_index(int(np.argmax(eta)), eta.shape)
                raise NumericalError(f"nu diverged at update {state.step}: the prior of topic "
                                     f"{topic_number(k)} in training document {d} reached "
                                     f"exp({eta[d, k]:.3g}); "
                                     f"{fix}")
        super().check_state(state)

    def sample(self, state: DMRSimplexState) -> dict[str, np.ndarray]:
        return {"phi": state.phi(), "nu": state.nu.copy()}

    def sample_prior(self, state: DMRSimplexState, sample: dict, documents: str) -> np.ndarray:
        """alpha_d = exp(x_d^T nu) of the sample's nu for the test or training documents."""
        return document_alpha(self.features_of(documents), sample["nu"])
