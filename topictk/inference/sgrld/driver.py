"""Stochastic gradient Riemannian Langevin dynamics for LDA (Patterson & Teh 2013).

docs/algorithms.md §7. Global: the expanded-mean parameters phi_hat (V, K) with the metric
diag(1/phi_hat); local: Gibbs chains of each mini-batch document with theta collapsed, from the
shared kernel :mod:`topictk.inference._minibatch`. The global update is dense (noise acts on
every entry) and runs in NumPy; its draws are ``Generator.standard_normal`` on the main stream
in storage order (w outer, k inner).
"""
from __future__ import annotations

import logging

import numpy as np

from topictk import streams as keys
from topictk.config.schema import Option
from topictk.corpus.batches import gather_batch
from topictk.errors import ConfigError, NumericalError
from topictk.inference.base import MemorySizes, StepInfo, Traits
from topictk.inference.hyper import resolve_alpha
from topictk.inference.minibatch import (
    batch_sizes,
    local_step_arrays,
    FLOOR,
    check_minibatch_config,
    epoch_schedule,
    local_statistics,
    minibatch_options,
    sample_steps_for,
)
from topictk.inference.registry import register
from topictk.inference.seed_prior import SeedPrior, SeededDriverMixin
from topictk.inference.sampled import SampledDriver
from topictk.inference.schedules import sgmcmc_step
from topictk.inference.sgrld.grow import grow_simplex_state
from topictk.limits import at_peak
from topictk.state.simplex import SimplexState
from topictk.streams import Streams

log = logging.getLogger("topictk")


def sgrld_update(phi_hat: np.ndarray, nbar_w: np.ndarray, batch_vocab: np.ndarray, beta: float,
                 eps: float, scale: float, noise: np.ndarray | None,
                 phi: np.ndarray | None = None,
                 seeds: SeedPrior | None = None) -> tuple[np.ndarray, int]:
    """One SGRLD step (§7.3) -> (new phi_hat, number of entries floored at 1e-300).

    phi_hat <- | phi_hat + eps (beta - phi_hat + R_B (nbar_kw - phi_kw nbar_k))
                 + sqrt(2 eps phi_hat) xi |,
    with ``nbar_w`` (V_B, K) the batch's expected counts of the words ``batch_vocab`` and
    ``noise`` the standard normals xi (None switches the noise off); ``phi`` may pass the
    normalised phi_hat when the caller has it. With ``seeds`` the prior beta is beta + o_wk
    (§2.14): eps o_wk is added at the overlay's entries.
    """
    if phi is None:
        phi = phi_hat / phi_hat.sum(axis=0, keepdims=True)
    # new = phi_hat + eps (beta - phi_hat - R_B phi nbar_k) (+ R_B nbar_kw on batch words), in place
    new = phi * (-eps * scale * nbar_w.sum(axis=0))
    new += (1.0 - eps) * phi_hat
    new += eps * beta
    if seeds is not None:
        seeds.add_to(new, eps)
    new[batch_vocab] += (eps * scale) * nbar_w
    if noise is not None:
        noise *= np.sqrt(2.0 * eps * phi_hat)
        new += noise
    np.abs(new, out=new)
    low = new < FLOOR
    new[low] = FLOOR
    return new, int(np.count_nonzero(low))


@register
class SGRLDDriver(SeededDriverMixin, SampledDriver):
    """SGRLD; one step is one mini-batch update of phi_hat."""

    name = "sgrld"
    # the local chains of a mini-batch, and the fold-ins, run on a cluster's workers
    traits = Traits(kind="mini-batch", paper="Patterson & Teh 2013", cluster=True,
                    cluster_fold_in=True, add_documents=("lda",))
    STATE = SimplexState
    OPTIONS = {
        **minibatch_options(),
        "step": {
            "a": Option("float", 0.01, low=0, low_open=True, help="epsilon_t scale a"),
            "b": Option("float", 100.0, low=0, low_open=True,
                        help="epsilon_t offset b (docs/algorithms.md §7.5)"),
            "c": Option("float", 0.55, low=0.5, high=1, low_open=True,
                        help="epsilon_t decay c; (0.5, 1] so the steps sum to infinity "
                             "and their squares do not"),
        },
        "burn_in": Option("int", None, low=0, nullable=True,
                          help="updates before samples are collected (default: half)"),
        "samples": Option("int", None, low=1, nullable=True,
                          help="posterior samples kept for evaluation, spread evenly over the "
                               "updates after burn_in (default 10 unless thin is given)"),
        "thin": Option("int", None, low=1, nullable=True,
                       help="instead of samples: keep a sample every thin-th update after "
                            "burn_in, so a resumed run with more iterations (and the same "
                            "burn_in, given explicitly) keeps its samples and adds new ones"),
    }

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        inf = data["inference"]
        check_minibatch_config(inf, where)
        if inf["burn_in"] is None:
            inf["burn_in"] = inf["iterations"] // 2
        if inf["burn_in"] >= inf["iterations"]:
            raise ConfigError(f"inference.burn_in must be < inference.iterations "
                              f"({inf['iterations']}); got {inf['burn_in']} ({where})")
        after = inf["iterations"] - inf["burn_in"]     # one sample per update at most
        if inf["thin"] is not None:
            if inf["samples"] is not None:
                raise ConfigError(f"inference.samples and inference.thin both given; keep "
                                  f"samples (a number spread over the run) or thin (every "
                                  f"thin-th update after burn_in), not both ({where})")
            if inf["thin"] > after:
                log.warning("inference.thin = %d but only %d updates follow inference.burn_in "
                            "= %d (inference.iterations = %d): no sample is kept, and "
                            "evaluation uses the final state (%s)", inf["thin"], after,
                            inf["burn_in"], inf["iterations"], where)
        elif inf["samples"] is None:
            inf["samples"] = 10
        if inf["samples"] is not None and inf["samples"] > after:
            log.warning("inference.samples = %d but only %d updates follow inference.burn_in = "
                        "%d (inference.iterations = %d): keeping %d samples (%s)",
                        inf["samples"], after, inf["burn_in"], inf["iterations"], after, where)
            inf["samples"] = after     # the resolved config (run's config.yaml) says what is used

    MEMORY_FIX = ("use a smaller vocabulary (topictk prepare --vocab-size): every update "
                  "makes several dense V x K arrays")
    #: (V, K) arrays an update makes beside phi_hat: phi, the normals, the new phi_hat and two
    #: terms of the noise's scale (sgrld_update)
    UPDATE_ARRAYS = 5

    @classmethod
    def memory_arrays(cls, data: dict, counts: dict) -> list[tuple[str, tuple[int, ...], int]]:
        """phi_hat (V, K), and the largest of: a mini-batch's local chains beside phi (V, K);
        the update (UPDATE_ARRAYS of (V, K), the batch's expected counts); a saved sample's
        phi; the curve's Gibbs fold-in with phi (the rows of its words, its theta-hat, and
        per-document priors where there are); Protocol B's fold-in of the training
        documents."""
        s = MemorySizes.of(data, counts)
        docs, _, _, words = batch_sizes(data, s)
        phi = ("phi", (s.V, s.K), 8)
        phases = [[phi] + local_step_arrays(data, s),
                  [("phi, the normals, the new phi_hat and the update's terms",
                    (cls.UPDATE_ARRAYS, s.V, s.K), 8),
                   ("batch words' expected counts", (words, s.K), 8),
                   ("batch documents' expected counts", (docs, s.K), 8)]
                  + cls.memory_priors(docs, s.K)]
        for what, n_docs, pairs in (("curve", s.curve_docs, s.curve_pairs),
                                    ("training documents", s.D if s.train_heldout else 0, s.M)):
            if n_docs:
                phases.append([phi, (f"phi rows of the {what}' words", (min(s.V, pairs), s.K),
                                     8), (f"theta-hat of the {what}", (n_docs, s.K), 8)]
                              + cls.memory_priors(n_docs, s.K))
        return at_peak([("phi_hat", (s.V, s.K), 8)], *phases)

    @classmethod
    def memory_priors(cls, docs: int, K: int) -> list:
        """Arrays of a prior per document for ``docs`` documents (none: one alpha)."""
        return []

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.doc_ptr, self.words = self.token_view      # the store's memory-mapped arrays
        inf = config.inference
        self.schedule = epoch_schedule(self.n_docs, int(inf.batch_size))
        self.collect_at = sample_steps_for(int(inf.iterations), int(inf.burn_in), inf.samples,
                                           inf.thin)


    def grow_state(self, old: SimplexState, added) -> SimplexState:
        """Added documents (:func:`topictk.inference.sgrld.grow.grow_simplex_state`)."""
        return grow_simplex_state(self, old, added)

    def continued_settings(self, state: SimplexState) -> dict:
        """A continued run's samples are taken over its own updates, on the union."""
        return {"inference.burn_in": int(state.step)}

    def scheduled_samples(self, upto: int) -> list[int]:
        """With ``samples`` they are spread over the updates after burn-in, so they follow
        ``inference.iterations``; with ``thin`` they do not."""
        return sorted(s for s in self.collect_at if s <= upto)

    def init_state(self) -> SimplexState:
        init = np.random.Generator(self.streams.persistent(keys.INIT))
        phi_hat = init.standard_gamma(1.0, size=(self.V, self.K))
        np.maximum(phi_hat, FLOOR, out=phi_hat)
        if self.seeds is not None:      # seed words start in their topics (§2.14)
            self.seeds.add_to(phi_hat)
        return SimplexState(phi_hat=phi_hat, alpha=resolve_alpha(self.config.model.alpha, self.K),
                            beta=float(self.config.model.beta))

    def step(self, state: SimplexState, t: int) -> StepInfo:
        inf = self.config.inference
        main = np.random.Generator(self.streams.persistent(keys.MAIN))
        ids, state.permutation = self.schedule.batch_ids(t, state.permutation, main)
        batch = gather_batch(self.doc_ptr, self.words, ids)
        phi = state.phi()
        nbar_w, _, fallbacks = local_statistics(self, batch, phi[batch.vocab], state.alpha,
                                                t)
        eps = sgmcmc_step(inf.step["a"], inf.step["b"], inf.step["c"], t)
        noise = main.standard_normal(size=state.phi_hat.shape)
        state.phi_hat, n_floored = sgrld_update(state.phi_hat, nbar_w, batch.vocab, state.beta,
                                                eps, self.n_docs / ids.size, noise, phi,
                                                self.seeds)
        state.floored += n_floored
        state.step = t + 1
        return StepInfo(tokens=batch.n_tokens, documents=int(ids.size),
                        collect_sample=state.step in self.collect_at,
                        extra={"epsilon": eps, "floored": n_floored, "fallbacks": fallbacks})

    def check_state(self, state: SimplexState) -> None:
        if not np.all(np.isfinite(state.phi_hat)):
            raise NumericalError(f"phi_hat became NaN or infinite at update {state.step}; "
                                 f"lower inference.step.a (the last good checkpoint is kept)")

    def topic_word(self, state: SimplexState) -> np.ndarray:
        return state.phi().T.copy()

    def sample(self, state: SimplexState) -> dict[str, np.ndarray]:
        return {"phi": state.phi()}

    def sample_phi(self, state: SimplexState, sample: dict) -> np.ndarray:
        return sample["phi"]

    def sample_prior(self, state: SimplexState, sample: dict, documents: str) -> np.ndarray:
        return state.alpha
