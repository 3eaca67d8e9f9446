"""Declared configuration keys and their constraints, checked with one message template:

    inference.step.c must be in (0.5, 1]; got 0.3 (configs/nips.yaml)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from topictk.config.seedfile import check_seed_words
from topictk.errors import ConfigError
from topictk.limits import short

_REQUIRED = object()


@dataclass(frozen=True)
class Option:
    """One configuration key: its kind, default and allowed range.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``str``, ``path``, ``choice``,
    ``int_list``, ``seeds`` (a mapping of labels to lists of words). ``nullable`` allows
    ``null``; ``auto`` allows the string ``auto``.
    Bounds are ``low``/``high`` with ``low_open``/``high_open`` for open ends.
    """

    kind: str
    default: Any = _REQUIRED
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    nullable: bool = False
    auto: bool = False
    help: str = ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def describe(self, finite: bool = False) -> str:
        """The allowed values, as shown in error messages; ``finite`` says that numbers must be
        finite (the message for a value of inf or nan)."""
        if self.kind == "choice":
            text = "one of " + ", ".join(str(c) for c in self.choices)
        elif self.kind == "bool":
            text = "true, false" if self.auto else "true or false"
        elif self.kind in ("str", "path"):
            text = "a string" if self.kind == "str" else "a path"
        elif self.kind == "seeds":
            text = "a mapping of labels to lists of words"
        else:
            noun = {"int": "an integer", "float": "a finite number" if finite else "a number",
                    "int_list": "a list of integers"}[self.kind]
            if self.low is not None and self.high is not None:
                text = (f"{noun} in {'(' if self.low_open else '['}{_fmt(self.low)}, "
                        f"{_fmt(self.high)}{')' if self.high_open else ']'}")
            elif self.low is not None:
                text = f"{noun} {'>' if self.low_open else '>='} {_fmt(self.low)}"
            elif self.high is not None:
                text = f"{noun} {'<' if self.high_open else '<='} {_fmt(self.high)}"
            else:
                text = noun
        if self.auto:
            text += " or auto"
        if self.nullable:
            text += " or null"
        return text

    def check(self, value: Any, key: str, where: str) -> Any:
        """Return the normalised value or raise :class:`ConfigError`."""
        def fail(finite: bool = False) -> ConfigError:
            return ConfigError(f"{key} must be {self.describe(finite)}; got {short(value)}"
                               f"{_hint(self.kind, value)} ({where})")

        if value is None:
            if self.nullable:
                return None
            raise fail()
        if self.auto and value == "auto":
            return "auto"
        if self.kind == "seeds":
            return check_seed_words(value, key, where)
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            raise fail()
        if self.kind in ("str", "path"):
            if isinstance(value, str) and value and not (self.kind == "path" and "\x00" in value):
                return value
            raise fail()
        if self.kind == "choice":
            if value in self.choices:
                return value
            raise fail()
        if self.kind == "int_list":
            if not isinstance(value, list) or not value:
                raise fail()
            return [self._check_number(v, fail, integer=True) for v in value]
        return self._check_number(value, fail, integer=self.kind == "int")

    def _check_number(self, value: Any, fail, integer: bool):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail()
        if integer:
            if isinstance(value, float) and not value.is_integer():
                raise fail()
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise fail(finite=True)
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise fail()
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            raise fail()
        return value


# what a value written in a YAML 1.1 form that configs do not read was probably meant to be
_NON_DECIMAL = re.compile(r"^[-+]?0[xXoObB][0-9a-fA-F_]+$")
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_YES_NO = frozenset({"yes", "no", "on", "off", "y", "n"})


def _hint(kind: str, value: Any) -> str:
    """Why a string was not read as the number or boolean it looks like."""
    if not isinstance(value, str):
        return ""
    text = value.strip()
    if kind in ("int", "float", "int_list"):
        if _NON_DECIMAL.match(text):
            return " (hex, octal and binary numbers are not read; write it in decimal)"
        if _SEXAGESIMAL.match(text):
            return " (h:m:s numbers are not read; write it as one decimal number)"
    if kind == "bool" and text.lower() in _YES_NO:
        return " (write true or false)"
    return ""


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# more topics than this cannot be held (dense K-wide rows per word and document) and overflow
# the kernels' packed topic ids
MAX_TOPICS = 1_000_000

# model.family: its default is the family of the algorithm (validation picks the family's keys)
FAMILY_HELP = "model family; left out, the family the algorithm trains"

#: the model families (model.family)
FAMILIES = ("lda", "dmr", "dlda", "keyatm", "hdp", "dtm")

MODEL = {
    "family": Option("choice", "lda", choices=FAMILIES, help=FAMILY_HELP),
    "topics": Option("int", _REQUIRED, low=1, high=MAX_TOPICS, help="number of topics K"),
    "alpha": Option("float", 0.1, low=0, low_open=True, auto=True,
                    help="symmetric document-topic prior (DMR: its starting value); auto "
                         "learns an asymmetric alpha, for the algorithms that can (docs/train.md "
                         "lists them)"),
    "beta": Option("float", 0.01, low=0, low_open=True, help="symmetric topic-word prior"),
}

#: seed words (docs/seeds.md): the seeded topics are the first rows, in the mapping's order.
#: A family that reads them includes these keys in its model section.
SEED_WEIGHT = 10.0
SEED_KEYS = {
    "seed_words": Option("seeds", None, nullable=True,
                         help="seeded topics: {label: [word, ...]}; the i-th label names "
                              "topic i (docs/seeds.md)"),
    "seed_file": Option("path", None, nullable=True,
                        help="a file of seed words (YAML of the same mapping, or one 'label "
                             "word word ...' per line), relative to the config; read into "
                             "model.seed_words"),
    "seed_weight": Option("float", SEED_WEIGHT, low=0, low_open=True,
                          help="extra prior of a seed word in its topic, in units of the "
                               "mean word count: o = seed_weight x training tokens / V"),
    "seed_mode": Option("choice", "prior", choices=("prior", "init"),
                        help="prior = the seed words' tokens start in their topic and their "
                             "extra prior keeps them there; init = the start only, no prior "
                             "(a baseline)"),
    "residual_topic": Option("bool", False,
                             help="require at least one unseeded topic after the seeded ones"),
}
MODEL.update(SEED_KEYS)

# Deep LDA / Poisson gamma belief network (docs/algorithms.md §8.10; defaults of Cong et al. 2017).
MODEL_DLDA = {
    "family": Option("choice", "dlda", choices=FAMILIES, help=FAMILY_HELP),
    "layers": Option("int_list", _REQUIRED, low=1, high=MAX_TOPICS,
                     help="topics per layer K_1, ..., K_L, bottom (word) layer first"),
    "topics": Option("int", None, low=1, high=MAX_TOPICS, nullable=True,
                     help="K_1; filled in from layers"),
    "eta": Option("float", "auto", low=0, low_open=True, auto=True,
                  help="Dirichlet prior of the columns of every Phi^(l); auto = 1/K_l"),
    "a0": Option("float", 0.01, low=0, low_open=True, help="p_j^(2) ~ Beta(a0, b0)"),
    "b0": Option("float", 0.01, low=0, low_open=True, help="p_j^(2) ~ Beta(a0, b0)"),
    "gamma0": Option("float", 1.0, low=0, low_open=True, help="r_k ~ Gam(gamma0/K_L, c0)"),
    "c0": Option("float", 1.0, low=0, low_open=True, help="rate of the prior of r"),
    "e0": Option("float", 1.0, low=0, low_open=True, help="c_j^(l) ~ Gam(e0, f0)"),
    "f0": Option("float", 1.0, low=0, low_open=True, help="c_j^(l) ~ Gam(e0, f0)"),
}

# DMR (docs/algorithms.md §9): the LDA keys (model.alpha is alpha_init); inference.algorithm
# dmr-sem / dmr-sgrld implies model.family: dmr
# model.features: the store's --meta features, or features of the store's time slices (§9.1)
MODEL_DMR = {**MODEL, "family": Option("choice", "dmr", choices=FAMILIES, help=FAMILY_HELP),
             "features": Option("choice", "store", choices=("store", "slice", "spline"),
                                help="the documents' features: store, those prepare --meta "
                                     "kept; slice, one per time slice of the store's "
                                     "--time-column (topic prevalence by slice); spline, a "
                                     "smooth basis of that time (model.spline_columns); each "
                                     "with the intercept"),
             "spline_columns": Option("int", 5, low=3, high=100,
                                      help="columns of the smooth basis of time "
                                           "(model.features: spline)")}

# the keyword topic model (docs/algorithms.md §2.13; defaults of the keyATM package, Eshima, Imai
# & Sasaki 2024): trained by inference.algorithm gibbs; model.seed_words are its keyword topics
MODEL_KEYATM = {
    **MODEL,
    "family": Option("choice", "keyatm", choices=FAMILIES, help=FAMILY_HELP),
    "gamma1": Option("float", 1.0, low=0, low_open=True,
                     help="keyword topics' switch share pi_k ~ Beta(gamma1, gamma2)"),
    "gamma2": Option("float", 1.0, low=0, low_open=True,
                     help="keyword topics' switch share pi_k ~ Beta(gamma1, gamma2)"),
    "beta_keyword": Option("float", 0.1, low=0, low_open=True,
                           help="symmetric prior of a keyword topic's distribution over its "
                                "seed words"),
}

def initial_hdp_topics(max_topics: int) -> int:
    """``model.initial_topics: auto`` of the HDP: a quarter of its K_max slots (at least 1),
    where the chain starts (docs/algorithms.md §2.15, "Start")."""
    return max(1, math.ceil(max_topics / 4))


# the hierarchical Dirichlet process (docs/algorithms.md §2.15; weak limit, the concentrations'
# priors of Teh, Jordan, Beal & Blei 2006 §7.1): trained by inference.algorithm gibbs
MODEL_HDP = {
    "family": Option("choice", "hdp", choices=FAMILIES, help=FAMILY_HELP),
    "max_topics": Option("int", "auto", low=2, high=MAX_TOPICS, auto=True,
                         help="K_max, the topic slots of the weak limit (live K is inferred "
                              "below it); auto = min(V, ceil(4 sqrt(D))) of the store"),
    "topics": Option("int", None, low=2, high=MAX_TOPICS, nullable=True,
                     help="K_max; filled in from max_topics"),
    "initial_topics": Option("int", "auto", low=1, high=MAX_TOPICS, auto=True,
                             help="the slots every token starts in (uniformly); the others "
                                  "start empty and topics are born from them; auto = "
                                  "ceil(K_max / 4)"),
    "alpha": Option("float", 1.0, low=0, low_open=True,
                    help="start of alpha_0, the document concentration: theta_d ~ "
                         "Dir(alpha_0 pi)"),
    "gamma": Option("float", 1.0, low=0, low_open=True,
                    help="start of gamma, the top-level concentration: pi ~ Dir(gamma / "
                         "K_max)"),
    "beta": Option("float", 0.01, low=0, low_open=True, help="symmetric topic-word prior"),
    # null default: a run saved before the key existed (absent) resumes without the moves
    "split_merge": Option("int", None, low=0, nullable=True,
                          help="split-merge moves after every sweep, which let the chain "
                               "forget its start (docs/algorithms.md §2.15); 0: none; null: "
                               "1"),
    "resample_concentration": Option("bool", True,
                                     help="resample alpha_0 and gamma after every sweep "
                                          "(auxiliary variables); false keeps their starts"),
    "alpha_a": Option("float", 1.0, low=0, low_open=True,
                      help="alpha_0 ~ Gamma(alpha_a, rate alpha_b)"),
    "alpha_b": Option("float", 1.0, low=0, low_open=True,
                      help="alpha_0 ~ Gamma(alpha_a, rate alpha_b)"),
    "gamma_a": Option("float", 1.0, low=0, low_open=True,
                      help="gamma ~ Gamma(gamma_a, rate gamma_b)"),
    "gamma_b": Option("float", 0.1, low=0, low_open=True,
                      help="gamma ~ Gamma(gamma_a, rate gamma_b)"),
}

# the dynamic topic model (docs/algorithms.md §14): trained by inference.algorithm dtm-sgld on a
# store with time slices (prepare --time-column)
MODEL_DTM = {
    "family": Option("choice", "dtm", choices=FAMILIES, help=FAMILY_HELP),
    "topics": MODEL["topics"],
    "phi_var": Option("float", 0.05, low=0, low_open=True,
                      help="variance of the topics' random walk: phi_t,k ~ N(phi_t-1,k, "
                           "phi_var I)"),
    "eta_var": Option("float", 1.0, low=0, low_open=True,
                      help="variance of a document's topic parameters around its slice's "
                           "mean: eta_d ~ N(alpha_t, eta_var I)"),
    "alpha_var": Option("float", 0.1, low=0, low_open=True,
                        help="variance of the slices' mean topic parameters' random walk: "
                             "alpha_t ~ N(alpha_t-1, alpha_var I)"),
    "alpha": Option("float", 0.1, low=0, low_open=True, auto=True,
                    help="document-topic prior of the LDA sweeps that start the chain "
                         "(inference.lda_sweeps) and of its first eta"),
    "beta": Option("float", 0.01, low=0, low_open=True,
                   help="topic-word prior of the LDA sweeps that start the chain, and the "
                        "smoothing of its first phi"),
}

# model.family -> the keys of the model section (families not listed use MODEL)
MODEL_FAMILIES = {"dlda": MODEL_DLDA, "dmr": MODEL_DMR, "keyatm": MODEL_KEYATM,
                  "hdp": MODEL_HDP, "dtm": MODEL_DTM}

INFERENCE_COMMON = {
    "algorithm": Option("choice", _REQUIRED, choices=(), help="inference algorithm"),
    "iterations": Option("int", _REQUIRED, low=1,
                         help="sweeps (batch algorithms) or mini-batch updates (online ones)"),
}

TRAINING = {
    "seed": Option("int", 0, low=0, help="the one seed every random stream derives from"),
    "threads": Option("int", "auto", low=1, auto=True,
                      help="OpenMP threads; never changes the numbers; auto = the CPUs this "
                           "process may use when the run starts (its affinity mask and cgroup "
                           "quota), recorded in the run's config.yaml"),
    "eval_every": Option("int", "auto", low=0, auto=True,
                         help="point perplexity every N steps into metrics.jsonl (0 = never); "
                              "auto = a tenth of "
                              "inference.iterations (10 for deep LDA)"),
    "checkpoint_every": Option("int", 50, low=0,
                               help="checkpoint every N steps; the last step, a signal and the "
                                    "time limit always write one (0 = only those)"),
    "keep_checkpoints": Option("int", 3, low=1, help="newest checkpoints kept"),
    "time_limit": Option("float", None, low=0, low_open=True, nullable=True,
                         help="stop gracefully after this many seconds of training "
                              "(evaluation excluded)"),
    "scheduler": Option("str", None, nullable=True,
                        help="address of a running Dask scheduler (tcp://HOST:PORT): the "
                             "shards of every step run on its workers, for the algorithms that "
                             "run on a cluster (topictk algorithms); never changes the numbers "
                             "(docs/cluster.md)"),
    "dask_workers": Option("int", None, low=1, nullable=True,
                           help="start a local Dask cluster of N worker processes for the run"),
    "cluster_timeout": Option("float", 30.0, low=0, low_open=True,
                              help="seconds to reach the Dask scheduler and its workers, "
                                   "and to reconnect to a scheduler that went away before "
                                   "the run stops with a checkpoint"),
}

EVALUATION = {
    "fold_in_sweeps": Option("int", 50, low=1, help="Gibbs fold-in sweeps per test document"),
    "fold_in_burn_in": Option("int", 25, low=0, help="fold-in sweeps discarded"),
    "chunk_docs": Option("int", 16, low=1, help="test documents per random-stream chunk"),
    "curve_docs": Option("int", "auto", low=1, auto=True, nullable=True,
                         help="test documents, evenly spread, that the in-training curve "
                              "scores (evaluate scores all); auto = 2 % of the store's "
                              "training documents, in [50, 1000]: the same documents for "
                              "every run of the store; null = all"),
    "curve_fold_in_sweeps": Option("int", 10, low=2, nullable=True,
                                   help="Gibbs fold-in sweeps of the in-training curve, the "
                                        "first half discarded; null = fold_in_sweeps"),
    "fold_in": Option("choice", "gibbs", choices=("gibbs", "mh", "fixed-point"),
                      help="estimator of theta that evaluate scores with (docs/evaluate.md, "
                           "'Two estimators of theta'): gibbs = the Gibbs fold-in; mh = "
                           "Metropolis-Hastings with tables from the counts (collapsed Gibbs "
                           "runs: gibbs, dmr-sem), O(1) per token whatever K is, for large K, "
                           "but slower to converge per sweep, so give it more sweeps (it "
                           "overestimates perplexity with few, docs/algorithms.md §2.7); "
                           "fixed-point = theta iterated to its fixed point (no sampling, "
                           "fold_in_tol, fold_in_max_iterations), the estimator of many other "
                           "toolkits' evaluations"),
    "fold_in_tol": Option("float", 1e-6, low=0, low_open=True,
                          help="fixed-point fold-in: stop a document when no theta_k changes "
                               "by this much in an update"),
    "fold_in_max_iterations": Option("int", 500, low=1,
                                     help="fixed-point fold-in: most updates per document"),
    "coherence_top": Option("int", 10, low=2, help="top words for UMass and NPMI"),
    "diversity_top": Option("int", 25, low=1, help="top words for topic diversity"),
}

TOP_LEVEL = ("corpus", "model", "inference", "training", "evaluation", "output")
