"""Hybrid stochastic variational-Gibbs inference for LDA (Mimno, Hoffman & Blei 2012).

docs/algorithms.md §6. The global q(phi_k) = Dir(lambda_k) and its schedule are those of online VB
(:class:`topictk.inference.variational.ovb.OVBDriver`: epochs, rho_t, the lazy lambda update,
optional eta); the local step replaces the variational E-step by Gibbs sampling of each document's
topics with theta collapsed, p(z = k) proportional to (alpha_k + n_dk) exp(E log phi_kw), run by
the shared mini-batch kernel :mod:`topictk.inference._minibatch`. The lambda update touches only
the (w, k) entries sampled in the batch.
"""
from __future__ import annotations

import numpy as np

from topictk.config.schema import Option
from topictk.corpus.batches import gather_batch
from topictk.inference.base import (
    Driver,
    EvaluationSet,
    FoldInPlan,
    StepInfo,
    fixed_point_settings,
)
from topictk.inference.minibatch import (
    batch_sizes,
    local_step_arrays,
    check_minibatch_config,
    local_statistics,
    minibatch_options,
    step_size,
)
from topictk.inference.variational.ovb import OVBDriver
from topictk.inference.registry import register
from topictk.inference.perplexity import mixture_probabilities
from topictk.inference.sampled import TRAIN_HELDOUT_PASS, cluster_fold_in, evaluation_plan
from topictk.inference.variational.template import ESTEP_OPTIONS, expected_log_topics
from topictk.state.variational import OnlineState
from topictk.streams import Streams


def _options() -> dict[str, Option]:
    options = {k: v for k, v in OVBDriver.OPTIONS.items()
               if k not in ESTEP_OPTIONS and k != "chunks"}
    options.update({k: v for k, v in minibatch_options().items() if k != "batch_size"})
    return options


@register
class HSVGDriver(OVBDriver):
    """HSVG; one step is one mini-batch update of lambda from Gibbs local statistics."""

    name = "hsvg"
    # the local chains of a mini-batch, and the fold-ins, run on a cluster's workers
    traits = OVBDriver.traits.but(paper="Mimno, Hoffman & Blei 2012", cluster_fold_in=True,
                                  own_fold_in=False, alpha_auto=False, objective=None)
    OPTIONS = _options()

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        check_minibatch_config(data["inference"], where)

    @classmethod
    def memory_phases(cls, data: dict, s) -> list[list]:
        """A mini-batch's local Gibbs chains with exp(E[log phi]) of its words; the update:
        the expected counts, their scaled copy and the rows of lambda they are added to;
        learning eta: the dense lambda and its digamma."""
        _, _, _, words = batch_sizes(data, s)
        phases = [local_step_arrays(data, s, "exp(E[log phi]) of the batch's words"),
                  [("batch expected counts, scaled, and their rows of lambda",
                    (3, words, s.K), 8)]]
        if data["inference"].get("learn_eta"):
            phases.append([("dense lambda and its digamma", (2, s.V, s.K), 8)])
        return phases

    @classmethod
    def memory_evaluation(cls, data: dict, s) -> list:
        """The curve's Gibbs fold-in with exp(E[log phi]) of every word (and the rows of its
        words), then the dense lambda and phi-hat for the mixture, and the theta-hat."""
        return [("exp(E[log phi]), or lambda and phi-hat", (2, s.V, s.K), 8),
                ("theta-hat of the curve", (s.curve_docs, s.K), 8)]

    @classmethod
    def memory_train_heldout(cls, data: dict, s) -> list:
        """Protocol B: the fold-in of every training document."""
        return [("exp(E[log phi]), or lambda and phi-hat", (2, s.V, s.K), 8),
                ("theta-hat of the training documents", (s.D, s.K), 8)]

    def __init__(self, config, store, threads: int = 1, *,
                 streams: Streams | None = None):
        super().__init__(config, store, threads, streams=streams)
        self.tokens = self.train_documents   # representation T, memory-mapped

    def weights(self, state: OnlineState, words: np.ndarray | None = None) -> np.ndarray:
        """exp(E log phi_kw - max_k E log phi_kw) for ``words`` (all words when None), (n, K)."""
        rows = None if words is None else np.ascontiguousarray(words, dtype=np.int32)
        E, _, _ = expected_log_topics(state.lam_tilde, state.lam_totals(), state.beta, True,
                                      self.threads, rows=rows, offset=state.offset,
                                      scale=state.scale)
        return E

    def step(self, state: OnlineState, t: int) -> StepInfo:
        docs = self.batch_documents(state, t)
        batch = gather_batch(self.tokens.doc_ptr, self.tokens.words, docs)
        nbar, _, fallbacks = local_statistics(self, batch, self.weights(state, batch.vocab),
                                              state.alpha, t)
        rho = step_size(t, self.tau0, self.kappa)
        self.update_lambda(state, batch.vocab, nbar, rho, self.n_docs / docs.size)
        if self.learn_eta:
            state.beta = self.eta_step(state, rho)
        state.rho = rho
        state.step = t + 1
        return StepInfo(tokens=batch.n_tokens, documents=int(docs.size),
                        extra={"rho": rho, "epoch": state.epoch, "fallbacks": fallbacks})

    def objective(self, state: OnlineState) -> float | None:
        return None

    def fold_in(self, state: OnlineState, documents, plan: FoldInPlan, *, prior=None,
                sample=None) -> np.ndarray:
        """theta-hat by the Gibbs fold-in of its own local step (§11.2)."""
        return Driver.fold_in(self, state, documents, plan, prior=prior)

    @classmethod
    def heldout_estimator(cls, config) -> str:
        return str(getattr(config.evaluation, "fold_in", "gibbs"))

    def fold_in_weights(self, state: OnlineState) -> np.ndarray:
        """exp(E log phi), the weights of its own local step."""
        return self.weights(state)

    def heldout_probabilities(self, state: OnlineState, samples, test: EvaluationSet,
                              pass_index: int, part: str = "test") -> np.ndarray:
        """:meth:`fold_in`, then the predictive p(w | doc) with phi-hat = lambda / lambda_k
        (§11.2); on a cluster, the fold-in of each block of chunks runs on a worker."""
        if self.cluster is not None and fixed_point_settings(self.config) is None:
            # the documents and sweeps of ``test`` (the curve's), as on one machine
            return cluster_fold_in(self, test, part, (self.weights(state), state.phi()),
                                   state.alpha, pass_index)
        theta = self.fold_in(state, test.observed, evaluation_plan(self, test, pass_index),
                             prior=state.alpha)
        return mixture_probabilities(test.heldout, theta, state.phi(), self.threads)

    def train_heldout_probabilities(self, state: OnlineState, samples, heldout,
                                    block: int = 4096) -> np.ndarray:
        """Protocol B: local Gibbs chains on each training document's observed tokens with the
        final lambda, as its own local step would run them."""
        train = EvaluationSet(observed=self.tokens, heldout=heldout)
        return self.heldout_probabilities(state, samples, train, TRAIN_HELDOUT_PASS, "train")
