"""A complete, commented YAML config for one algorithm, generated from the option declarations
that validate configs (schema.py and the drivers' ``OPTIONS``), so it shows every key with
the default, the allowed values and the meaning that validation uses."""
from __future__ import annotations

import difflib
import math
import textwrap
from pathlib import Path
from typing import Any

import yaml

from topictk.config.loader import Catalogue, _Loader
from topictk.config.schema import (
    EVALUATION,
    INFERENCE_COMMON,
    MODEL,
    MODEL_FAMILIES,
    TRAINING,
    Option,
)
from topictk.errors import ConfigError, UsageError
from topictk.limits import short

# values of the keys that have no default (required), written into a generated config
DEFAULT_TOPICS = 20
DEFAULT_ITERATIONS = 100
# values a generated config of one algorithm writes in place of the shared ones, each because
# with the shared one its generated config scores more than 10 % above collapsed Gibbs' (at
# the same K: the example corpus and 2,000 documents of 20 Newsgroups, docs/train.md):
# - SGRLD's step size decays with the update count, so it needs more updates than a batch
#   algorithm needs sweeps: at 100 updates 1.2 to 1.8 x Gibbs, at 2,000 within 5 % (2,000
#   updates of 64 documents are 11 epochs of 20 Newsgroups, where Gibbs' 100 sweeps are 100);
# - second-order CVB with beta 0.01 is 1.12 to 1.28 x Gibbs and within 4 % with beta 0.1, the
#   setting of Teh, Newman & Welling's comparison (2007);
# - the mean-field (exp-digamma) updates of vb, ovb, hsvg and pem weigh a count n of a topic in
#   a document by exp(psi(n + alpha)), about n + alpha - 0.5, so VB's alpha acts about 0.5
#   lower than the same alpha in Gibbs (Asuncion, Welling, Smyth & Teh 2009): alpha 0.5, not
#   0.1 (1.13 to 1.15 x Gibbs on the example corpus with 0.1, 0.99 to 1.10 with 0.5); hsvg's
#   noisier Gibbs-sampled local step also needs its step size to decay faster (kappa 0.8);
# - deep LDA's SGRLD took 200 of the example corpus' 239 training documents per update, so 100
#   updates moved its chain little (1.30 x Gibbs): 600 updates of 32 documents visit as many
#   documents as 100 of 200 (1.06 x Gibbs)
# On a store (--corpus), "epochs" is the least number of epochs a mini-batch algorithm trains,
# and "batches" the most updates an epoch takes (a larger store gets larger batches); on full
# 20 Newsgroups (11,257 training documents, K = 20, seed 1) one epoch was not enough:
# - ovb and hsvg scored 1.21 and 1.30 x Gibbs after 1 epoch of 64 documents, 1.16 and 1.18
#   after 10 (their curves flat from epoch 5); 20 epochs of 563 documents (20 updates an
#   epoch) score 1.06 and 1.06 in about 10 s; the example corpus keeps batches of 64;
# - tlasgr and tlfsgr: 1.28 and 1.27 after 100 updates of 200 documents (1.8 epochs), 1.00
#   after 10 epochs; dlda-sgrld 1.13 after 600 updates of 32 (1.7 epochs), 0.98 after 10
VB_ALPHA = 0.5
GENERATED: dict[str, dict[str, dict[str, Any]]] = {
    "sgrld": {"inference": {"iterations": 2000}},
    "dmr-sgrld": {"inference": {"iterations": 2000}},
    "cvb": {"model": {"beta": 0.1}},
    "vb": {"model": {"alpha": VB_ALPHA}},
    "ovb": {"model": {"alpha": VB_ALPHA}, "epochs": 20, "batches": 20},
    "hsvg": {"model": {"alpha": VB_ALPHA}, "inference": {"kappa": 0.8}, "epochs": 20,
             "batches": 20},
    "pem": {"model": {"alpha": VB_ALPHA}},
    "dlda-sgrld": {"inference": {"iterations": 600, "batch_size": 32}, "epochs": 10},
    "tlasgr": {"epochs": 10},
    "tlfsgr": {"epochs": 10},
}
INDENT = "  "


def check_algorithm(name: str, catalogue: Catalogue) -> None:
    """Refuse an algorithm the catalogue does not know, with a close match, as config
    validation does."""
    names = catalogue.algorithm_names()
    if name in names:
        return
    close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ConfigError(f"algorithm must be one of {', '.join(names)}; got {short(name)}{hint}")


def render_config(algorithm: str, catalogue: Catalogue, *, corpus: str | None = None,
                  topics: int | None = None, documents: int | None = None,
                  model: dict | None = None) -> str:
    """The YAML text of a config training ``algorithm``: every key with its default, its
    allowed values and its meaning as comments.

    Parameters
    ----------
    algorithm
        An ``inference.algorithm`` the catalogue knows.
    catalogue
        The registered algorithms (``topictk.inference.registry.CATALOGUE``).
    corpus
        The corpus store; ``None`` writes ``corpus: null``, which loading reports as missing.
    topics
        Number of topics K (for deep LDA the one layer ``model.layers: [K]``); ``None``
        writes DEFAULT_TOPICS.
    documents
        The training documents of the corpus store, when known: a mini-batch algorithm's
        iterations then cover at least one epoch (:func:`generated_inference`).
    model
        ``model`` keys to write instead of their defaults (e.g. ``{"features": "slice"}``).
    """
    check_algorithm(algorithm, catalogue)
    driver = catalogue.get_driver(algorithm)
    k = DEFAULT_TOPICS if topics is None else int(topics)
    summary = " ".join((driver.__doc__ or "").strip().split("\n\n")[0].split())
    lines = ["# " + line for line in textwrap.wrap(f"inference.algorithm {algorithm}: {summary}",
                                                   96)]
    lines += ["# Every key with its default; a comment above each gives its meaning and [allowed "
             "values].",
             "# Paths are relative to this file's folder, or to the working directory when the "
             "config is",
             "# read from standard input (topictk train --config -); topictk train --out is "
             "relative to the",
             "# working directory.", ""]
    lines += _entry("corpus", corpus, "the corpus store, as written by topictk prepare --out "
                                      "STORE (required)", "a path", 0)
    lines += _entry("output", f"runs/{algorithm}", "the run directory to write", "a path", 0)
    model_schema = MODEL_FAMILIES.get(driver.traits.family, MODEL)
    model_values = {"family": driver.traits.family, "topics": k}
    if "layers" in model_schema:
        model_values = {"family": driver.traits.family, "layers": [k], "topics": None}
    own = GENERATED.get(algorithm, {})
    model_values.update(own.get("model", {}))
    model_values.update(model or {})
    inference_schema = {**INFERENCE_COMMON, **driver.OPTIONS}
    own_inference = own.get("inference", {})
    iterations = own_inference.get("iterations", DEFAULT_ITERATIONS)
    inference_values = {"algorithm": algorithm,
                        **generated_inference(inference_schema, documents, iterations,
                                              own_inference.get("batch_size"),
                                              own.get("epochs", 1), own.get("batches"))}
    inference_values.update({key: value for key, value in own_inference.items()
                             if key not in inference_values})
    helps = {"iterations": _iterations_help(inference_schema, documents)}
    for name, schema, values in (("model", model_schema, model_values),
                                 ("inference", inference_schema, inference_values),
                                 ("training", TRAINING, {}),
                                 ("evaluation", EVALUATION, {})):
        lines += ["", f"{name}:"] + _section(schema, values, 1, helps)
    return "\n".join(lines) + "\n"


def generated_inference(schema: dict, documents: int | None,
                        iterations: int = DEFAULT_ITERATIONS,
                        batch_size: int | None = None, epochs: int = 1,
                        batches: int | None = None) -> dict[str, Any]:
    """The inference keys a generated config writes in place of their declared defaults, so
    that its defaults train a model that uses every part of it:

    - ``iterations`` (no declared default): ``iterations`` (DEFAULT_ITERATIONS, or the
      algorithm's own in GENERATED), and for a mini-batch algorithm (a ``batch_size`` key) on
      a store of ``documents`` training documents at least ``epochs`` epochs (1, or the
      algorithm's own in GENERATED), ceil(epochs * documents / batch_size) updates
      (``batch_size`` the algorithm's own in GENERATED, else the declared default); without a
      store the key's comment says how many updates an epoch is;
    - ``batch_size``, for an algorithm with ``batches`` in GENERATED, on a store: the larger
      of its batch size and ceil(documents / batches), so an epoch is at most ``batches``
      updates however large the store;
    - a schedule whose first update the declared defaults put after the last iteration
      (dmr-sem's nu: ``optimize_burn_in`` 100, ``optimize_interval`` 50, first update at
      sweep 150) starts after a quarter of the iterations and updates every tenth of them;
      ``nu_burn_in`` likewise. Schedules that fit (gibbs' alpha) keep their defaults;
    - deep LDA's point perplexity (``point_perplexity.every``), a fresh test chain of 600
      iterations that costs more than the training at every evaluation, runs at the last
      update only: the run's perplexity is the persistent test chain's, which the point
      perplexity does not touch.

    Only generated text changes: a config that sets these keys trains as before."""
    batch = schema.get("batch_size")
    if documents is not None and isinstance(batch, Option):
        size = int(batch.default if batch_size is None else batch_size)
        if batches is not None:
            size = max(size, math.ceil(int(documents) / batches))
        iterations = max(iterations, math.ceil(epochs * int(documents) / size))
    values: dict[str, Any] = {"iterations": iterations}
    if batches is not None and documents is not None and isinstance(batch, Option):
        values["batch_size"] = size
    burn_in, interval = schema.get("optimize_burn_in"), schema.get("optimize_interval")
    if isinstance(burn_in, Option) and isinstance(interval, Option):
        first = (burn_in.default // interval.default + 1) * interval.default
        if first > iterations:
            values["optimize_burn_in"] = iterations // 4
            values["optimize_interval"] = max(1, iterations // 10)
    nu_burn_in = schema.get("nu_burn_in")
    if isinstance(nu_burn_in, Option) and nu_burn_in.default >= iterations:
        values["nu_burn_in"] = iterations // 4
    if isinstance(schema.get("point_perplexity"), dict):
        values["point_perplexity"] = {"every": iterations}
    return values


def _iterations_help(schema: dict, documents: int | None) -> str | None:
    """The comment on a mini-batch algorithm's iterations when the store's size is unknown."""
    batch = schema.get("batch_size")
    if documents is not None or not isinstance(batch, Option):
        return None
    return ("mini-batch updates; one epoch is (training documents / batch_size) updates: "
            "raise iterations to at least that (topictk config --corpus STORE does)")


def _section(schema: dict, values: dict, depth: int,
             helps: dict[str, str] | None = None) -> list[str]:
    lines: list[str] = []
    for key, option in schema.items():
        if isinstance(option, dict):
            lines += [f"{INDENT * depth}{key}:"] + _section(option, values.get(key, {}),
                                                            depth + 1)
            continue
        value = values.get(key, None if option.required else option.default)
        meaning = (helps or {}).get(key) or option.help
        meaning += " (required)" if option.required else ""
        lines += _entry(key, value, meaning, _allowed(key, option), depth)
    return lines


def _allowed(key: str, option: Option) -> str:
    if key == "algorithm":
        return "the algorithm of this config (topictk algorithms lists them)"
    return option.describe()


def _entry(key: str, value: Any, meaning: str, allowed: str, depth: int) -> list[str]:
    pad = INDENT * depth
    return [f"{pad}# {meaning} [{allowed}]", f"{pad}{key}: {_scalar(value)}"]


def _scalar(value: Any) -> str:
    """``value`` as YAML that the config loader reads back to the same value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    text = str(value)
    try:
        plain = yaml.load(text, Loader=_Loader) == text
    except yaml.YAMLError:
        plain = False
    return text if plain and "#" not in text else "'" + text.replace("'", "''") + "'"


# the example configs shipped with the package (package data; in the source tree a link to
# the repository's configs/ folder, whose paths are relative to that folder)
EXAMPLES = Path(__file__).resolve().parent.parent / "configs"
EXAMPLE_PREFIX = "example_"


def _examples() -> dict[str, Path]:
    """Name -> file: ``gibbs`` for ``example_gibbs.yaml``, the stem for the others (paper
    reproductions)."""
    return {path.stem.removeprefix(EXAMPLE_PREFIX): path
            for path in sorted(EXAMPLES.glob("*.yaml"))}


def example_text(name: str) -> str:
    """The text of the bundled example config ``name`` (``dmr-sem`` finds ``dmr_sem``)."""
    examples = _examples()
    path = examples.get(name) or examples.get(name.replace("-", "_"))
    if path is None:
        close = difflib.get_close_matches(name, list(examples), n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise UsageError(f"--example must be one of {', '.join(examples)}; got {short(name)}"
                         f"{hint}")
    return path.read_text(encoding="utf-8")
