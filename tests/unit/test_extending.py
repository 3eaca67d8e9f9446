"""A new algorithm added through the documented extension points only (docs/extending.md):
a driver class defined here, outside the package, with its options, traits and saved state,
registered with ``register_algorithm``, then trained, stopped, resumed, evaluated and used by
``topics`` and ``infer`` through the command line, as any built-in algorithm is.

The toy is a mixture of unigrams (Nigam et al. 2000) fitted by stochastic EM: every document
belongs to one topic z_d; a step draws every z_d from p(z_d = k | rest) proportional to
(m_k + alpha_k) prod_w phi_kw^n_dw, with phi-hat_k = (n_kw + beta) / (n_k + V beta) from the
word counts of the documents of topic k. It draws from the run's persistent streams only, so
a resumed run must continue the very same chain."""
from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass, field

import numpy as np
import pytest
import yaml

from tests.integration._cli import EXAMPLE, assert_same_run, fails, ok, run
from topictk.config.schema import Option
from topictk.errors import ConfigError
from topictk.inference.base import StepInfo, Traits
from topictk.inference.registry import (
    algorithm_names,
    get_driver,
    register_algorithm,
    unregister_algorithm,
)
from topictk.inference.sampled import SampledDriver
from topictk.state.schema import STEP, Array, Saved, Value
from topictk.streams import INIT, MAIN

NAME = "unigram-mix"


@dataclass
class UnigramMixState(Saved):
    """The topic of every training document and the document prior; the counts follow."""

    SCHEMA = {"z": Array("int32", ("D",)), "alpha": Array("float64", ("K",)),
              "beta": Value(float), **STEP}

    z: np.ndarray
    alpha: np.ndarray
    beta: float
    step: int = 0
    sample_steps: list[int] = field(default_factory=list)


class UnigramMixDriver(SampledDriver):
    """Mixture of unigrams by stochastic EM: one topic per document, redrawn every step."""

    name = NAME
    traits = Traits(kind="sampled", paper="Nigam et al. 2000", threads=False,
                    objective="log_likelihood_per_token")
    STATE = UnigramMixState
    OPTIONS = {"burn_in": Option("int", 2, low=0,
                                 help="steps before every step's topics are saved as a sample")}
    # the step after which the test sends this process SIGINT (None: never)
    stop_after: int | None = None

    @classmethod
    def check_config(cls, data: dict, where: str) -> None:
        inference = data["inference"]
        if inference["burn_in"] >= inference["iterations"]:
            raise ConfigError(f"inference.burn_in must be < inference.iterations "
                              f"({inference['iterations']}); got {inference['burn_in']} "
                              f"({where})")

    def init_state(self) -> UnigramMixState:
        rng = np.random.Generator(self.streams.persistent(INIT))
        model = self.config.model
        return UnigramMixState(z=rng.integers(0, self.K, self.n_docs).astype(np.int32),
                               alpha=np.full(self.K, float(model.alpha)),
                               beta=float(model.beta))

    def _entry_docs(self) -> np.ndarray:
        indptr = self.csr_view[0]
        return np.repeat(np.arange(self.n_docs), np.diff(indptr))

    def _log_likelihoods(self, phi: np.ndarray) -> np.ndarray:
        """(D, K): log p(words of d | topic k) under the word-major topics ``phi`` (V, K)."""
        _, indices, counts = self.csr_view
        terms = counts[:, None] * np.log(phi[indices])
        return np.stack([np.bincount(self._entry_docs(), weights=terms[:, k],
                                     minlength=self.n_docs) for k in range(self.K)], axis=1)

    def topic_word(self, state: UnigramMixState) -> np.ndarray:
        _, indices, counts = self.csr_view
        cells = state.z[self._entry_docs()].astype(np.int64) * self.V + indices
        n_kw = np.bincount(cells, weights=counts, minlength=self.K * self.V)
        n_kw = n_kw.reshape(self.K, self.V)
        return (n_kw + state.beta) / (n_kw.sum(axis=1, keepdims=True) + self.V * state.beta)

    def step(self, state: UnigramMixState, t: int) -> StepInfo:
        rng = np.random.Generator(self.streams.persistent(MAIN))
        sizes = np.bincount(state.z, minlength=self.K)
        log_p = self._log_likelihoods(self.topic_word(state).T) + np.log(sizes + state.alpha)
        p = np.exp(log_p - log_p.max(axis=1, keepdims=True))
        cumulative = np.cumsum(p, axis=1)
        u = rng.random(self.n_docs)[:, None] * cumulative[:, -1:]
        state.z = np.minimum((cumulative < u).sum(axis=1), self.K - 1).astype(np.int32)
        state.step = t + 1
        if self.stop_after == state.step:
            os.kill(os.getpid(), signal.SIGINT)
        return StepInfo(tokens=self.n_tokens, documents=self.n_docs,
                        collect_sample=state.step > self.config.inference.burn_in)

    def objective(self, state: UnigramMixState) -> float:
        loglik = self._log_likelihoods(self.topic_word(state).T)
        return float(loglik[np.arange(self.n_docs), state.z].sum() / self.n_tokens)

    def sample(self, state: UnigramMixState) -> dict[str, np.ndarray]:
        return {"phi": self.topic_word(state).T}

    def sample_phi(self, state: UnigramMixState, sample: dict[str, np.ndarray]) -> np.ndarray:
        return sample["phi"]

    def sample_prior(self, state: UnigramMixState, sample: dict[str, np.ndarray],
                     documents: str) -> np.ndarray:
        return state.alpha


@pytest.fixture(scope="module")
def registered():
    """The toy as ``inference.algorithm: unigram-mix`` for this module's tests, withdrawn
    afterwards so that no other test sees it."""
    register_algorithm(NAME, UnigramMixDriver)
    yield UnigramMixDriver
    unregister_algorithm(NAME)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("extending") / "store"
    ok("prepare", EXAMPLE, "--out", out)
    return out


def _config(directory, store, output: str):
    """A config of the toy that evaluates every 4 steps and checkpoints every 4."""
    data = {"corpus": str(store), "output": str(directory / output),
            "model": {"topics": 4, "alpha": 0.5, "beta": 0.05},
            "inference": {"algorithm": NAME, "iterations": 12, "burn_in": 9},
            "training": {"seed": 3, "eval_every": 4, "checkpoint_every": 4},
            "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5}}
    path = directory / f"{output}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_the_toy_is_listed_and_configured_like_a_built_in_one(registered):
    assert NAME in algorithm_names() and get_driver(NAME) is registered
    row = next(line for line in ok("algorithms").stdout.splitlines() if line.startswith(NAME))
    assert row.split()[1:6] == ["lda", "sampled", "no", "yes", "no"]
    assert "Nigam et al. 2000" in row
    text = ok("config", NAME, "--topics", "4").stdout
    assert f"# {registered.OPTIONS['burn_in'].help} [an integer >= 0]" in text


def test_stopped_and_resumed_equals_uninterrupted_and_evaluates(registered, store, tmp_path,
                                                                monkeypatch):
    ok("train", "--config", _config(tmp_path, store, "straight"), "-q")
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"

    config = _config(tmp_path, store, "stopped")
    monkeypatch.setattr(registered, "stop_after", 6)
    outcome = run("train", "--config", config, "-q")
    assert outcome.exit_code == 130, (outcome.stderr, outcome.exception)
    assert "SIGINT received: stopped at step 6, checkpoint written" in outcome.stderr
    assert not (stopped / "model.npz").exists()
    monkeypatch.setattr(registered, "stop_after", None)
    resumed = ok("train", "--config", config, "--resume")
    assert f"resuming {stopped} from step 6" in resumed.stderr

    assert_same_run(straight, stopped, same_samples=True)
    scores = [json.loads(ok("evaluate", path, "--json").stdout) for path in (straight, stopped)]
    assert scores[0]["perplexity"] == scores[1]["perplexity"]
    assert np.isfinite(scores[0]["perplexity"]) and scores[0]["perplexity"] > 1
    assert ok("topics", straight).stdout == ok("topics", stopped).stdout
    new = tmp_path / "new.txt"
    new.write_text("def loop over a list\nimport the module and call it\n", encoding="utf-8")
    inferred = [ok("infer", path, new, "--sweeps", "6", "--burn-in", "2").stdout
                for path in (straight, stopped)]
    assert inferred[0] == inferred[1] and len(inferred[0].splitlines()) == 2


def test_a_check_of_the_toy_refuses_a_config(registered, store, tmp_path):
    config = _config(tmp_path, store, "bad")
    message = fails(2, "train", "--config", config, "--set", "inference.burn_in=12")
    assert message.startswith("inference.burn_in must be < inference.iterations (12); got 12")


def test_registration_is_checked_and_withdrawn():
    class Misnamed(UnigramMixDriver):
        name = "other"

    with pytest.raises(TypeError, match="named 'other'"):
        register_algorithm(NAME, Misnamed)
    with pytest.raises(ValueError, match="already registered"):
        register_algorithm("gibbs", type("Gibbs", (UnigramMixDriver,), {"name": "gibbs"}))
    with pytest.raises(ValueError, match="built in"):
        unregister_algorithm("gibbs")
    register_algorithm("unigram-mix-2", type("Two", (UnigramMixDriver,),
                                             {"name": "unigram-mix-2"}))
    unregister_algorithm("unigram-mix-2")
    assert "unigram-mix-2" not in algorithm_names()
    assert "got 'unigram-mix-2'" in fails(2, "config", "unigram-mix-2")
