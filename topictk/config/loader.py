"""Load, override and validate an experiment config before any work starts."""
from __future__ import annotations

import copy
import difflib
import itertools
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, ClassVar, Mapping, Protocol

import yaml

from topictk.config.seedfile import read_seed_file
from topictk.config.schema import (
    EVALUATION,
    INFERENCE_COMMON,
    MODEL,
    SEED_KEYS,
    MODEL_FAMILIES,
    TOP_LEVEL,
    TRAINING,
    initial_hdp_topics,
    Option,
)
from topictk.errors import ConfigError
from topictk.limits import (
    dense_bytes,
    json_loads,
    local_workers_problem,
    memory_shortfall,
    one_line,
    resolve_threads,
    short,
)

# the implicit types of YAML 1.1 that surprise people: ``010`` is 8 (octal), ``0x10`` 16,
# ``1:00`` 60 (sexagesimal), ``yes``/``no``/``on``/``off`` booleans and ``2024-01-01`` a date
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"

# the most values a config may hold once its aliases are expanded (a real one holds under
# a hundred); a "billion laughs" file of nine nested aliases expands to 10^9
MAX_CONFIG_NODES = 100_000


class _Loader(yaml.SafeLoader):
    """SafeLoader reading numbers as people write them in a config:

    - integers in decimal only: ``010`` is 10 (not octal 8), ``1_000`` is 1000; ``0x10``,
      ``0o10``, ``0b10`` and ``1:00`` (sexagesimal) stay strings, which a numeric key refuses;
    - floats with or without a dot (``1e-3``, ``1.5``, ``.inf``), never sexagesimal;
    - booleans ``true``/``false`` only: ``yes``, ``no``, ``on``, ``off`` stay strings, which a
      boolean key refuses (and a string key keeps: ``stopwords: no`` is the word "no");
    - dates stay strings.

    Aliases are expanded by reference; a document whose expansion holds more than
    MAX_CONFIG_NODES values, or refers to itself, is refused before it is used. A mapping
    that holds a key twice is refused (:class:`DuplicateKeyError`): YAML would keep the last
    value without a word, and a config edited in two places would train another model than
    the one its first lines describe. Keys a merge (``<<: *base``) brings in may still be
    overridden, as YAML intends."""

    yaml_implicit_resolvers: ClassVar[dict] = {
        first: [(tag, regexp) for tag, regexp in resolvers
                if tag not in (_INT, _FLOAT, _BOOL, _TIMESTAMP)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node).replace("_", "")
        try:
            return int(text, 10)
        except ValueError:
            raise yaml.constructor.ConstructorError(
                None, None, f"{short(text)} is not a decimal integer", node.start_mark) from None

    def construct_document(self, node):
        _check_expansion(node)
        self._check_duplicate_keys(node)
        return super().construct_document(node)

    def _check_duplicate_keys(self, root: yaml.Node) -> None:
        """Raise DuplicateKeyError for the first mapping, at any depth, that holds a key twice
        (keys compared as loaded: ``1`` and ``01`` are one key, as YAML would merge them)."""
        visited: set[int] = set()
        stack: list[tuple[yaml.Node, str]] = [(root, "")]
        while stack:
            node, path = stack.pop()
            if id(node) in visited:
                continue
            visited.add(id(node))
            if isinstance(node, yaml.SequenceNode):
                stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node.value))
                continue
            if not isinstance(node, yaml.MappingNode):
                continue
            lines: dict[Any, int] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE:
                    stack.append((value_node, path))
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    continue        # a mapping or list as a key: the constructor refuses it
                key = self.construct_object(key_node, deep=True)
                label = key if isinstance(key, str) else short(key, 60)
                name = f"{path}.{label}" if path else str(label)
                line = key_node.start_mark.line + 1
                if key in lines:
                    raise DuplicateKeyError(name, lines[key], line, key_node.start_mark)
                lines[key] = line
                stack.append((value_node, name))


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping of a YAML document holds one key twice; ``problem`` says which and where."""

    def __init__(self, key: str, first: int, second: int, mark):
        where = f"lines {first} and {second}" if first != second else f"line {first}"
        super().__init__(None, None, f"key {key} appears twice ({where}); keep one", mark)
        self.key = key


_Loader.add_constructor(_INT, _Loader.construct_yaml_int)
_Loader.add_implicit_resolver(_INT, re.compile(r"^[-+]?[0-9][0-9_]*$"), list("-+0123456789"))
_Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?
                   |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.VERBOSE),
    list("-+0123456789."))
_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph that refers to itself or expands to more than MAX_CONFIG_NODES
    values; counted without expanding (each node's size once, shared nodes reused)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_CONFIG_NODES:
                raise yaml.composer.ComposerError(
                    None, None, f"the aliases of this document expand to more than "
                    f"{MAX_CONFIG_NODES:,} values; write the values out, or use fewer aliases",
                    node.start_mark)
            size[key] = total
            continue
        if key in size:
            continue
        if key in on_path:
            raise yaml.composer.ComposerError(None, None, "an alias refers to the node that "
                                              "contains it", node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise yaml.composer.ComposerError(None, None, "an alias refers to the node "
                                                  "that contains it", child.start_mark)
            if id(child) not in size:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class Section(Mapping[str, Any]):
    """A read-only config section with attribute access (``config.model.topics``)."""

    def __init__(self, values: dict[str, Any]):
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Section({self._values!r})"


class Config:
    """A validated experiment: paths resolved, every key present with its final value."""

    def __init__(self, data: dict[str, Any], source: Path | None):
        self.source = source
        self.corpus = Path(data["corpus"])
        self.output = Path(data["output"])
        self.model = Section(data["model"])
        self.inference = Section(data["inference"])
        self.training = Section(data["training"])
        self.evaluation = Section(data["evaluation"])
        # bytes the run's large arrays were estimated to need (None: no store to count)
        self.memory_estimate: int | None = None
        # corpus and output as messages show them: as typed, reached from the working
        # directory (the config's folder as typed, then the value), see shown_path
        self.shown: dict[str, str] = {"corpus": str(self.corpus), "output": str(self.output)}

    def to_dict(self) -> dict[str, Any]:
        """The resolved config, as written to the run directory's config.yaml."""
        return {
            "corpus": str(self.corpus),
            "model": dict(self.model),
            "inference": dict(self.inference),
            "training": dict(self.training),
            "evaluation": dict(self.evaluation),
            "output": str(self.output),
        }


def _suggest(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'? allowed: " if close else "; allowed: "
    return f"{hint}{', '.join(sorted(allowed))}"


def parse_override(text: str) -> tuple[list[str], Any]:
    """``section.key=value`` -> (["section", "key"], value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"--set expects section.key=value; got {short(text)}")
    key, _, raw = text.partition("=")
    parts = [p for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise ConfigError(f"--set expects section.key=value; got {short(text)}")
    if parts in (["corpus"], ["output"]):
        return parts, raw.strip() or None     # a path as written: output=2024 is a folder name
    try:
        value = yaml.load(raw, Loader=_Loader) if raw.strip() else None
    except DuplicateKeyError as exc:
        raise ConfigError(f"--set {text}: key {exc.key} appears twice; keep one") from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        value = raw     # not YAML: the text itself, which the key's check accepts or refuses
    return parts, value


def _apply_override(data: dict, parts: list[str], value: Any) -> None:
    node = data
    for i, part in enumerate(parts[:-1]):
        if part in TOP_LEVEL and i == 0 and part in ("corpus", "output"):
            raise ConfigError(f"--set {'.'.join(parts)}: '{part}' is a value, not a section; "
                              f"use --set {part}=PATH")
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {'.'.join(parts)}: '{'.'.join(parts[:i + 1])}' is not a "
                              f"section")
        node = child
    node[parts[-1]] = value


def _origin(key: str, where: str, origins: Mapping[str, str]) -> str:
    """Where the value of ``key`` (dotted) came from, for a message: the option that set it
    or a section holding it (``--set model.topics=abc``), else ``where`` (the config)."""
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        given = origins.get(".".join(parts[:n]))
        if given is not None:
            return given
    return where


def _refuse_unknown(raw: dict, known, noun: str, prefix: str, where: str,
                    origins: Mapping[str, str]) -> None:
    """Refuse the first key of ``raw`` that is not in ``known``: the ``noun`` (key, section)
    named with its ``prefix`` (the section and a dot, or nothing at the top), where it was
    set, and the nearest known name."""
    for key in raw:
        if key not in known:
            name = short(key, 60)[1:-1] if isinstance(key, str) else short(key, 60)
            raise ConfigError(f"unknown {noun} '{prefix}{name}' "
                              f"({_origin(f'{prefix}{key}', where, origins)})"
                              f"{_suggest(name, list(known))}")


def _check_section(raw: Any, schema: dict, section: str, where: str,
                   origins: Mapping[str, str] = {}) -> dict:   # noqa: B006 (read only)
    """Validate one mapping against ``schema`` (values are Options or nested schemas); an
    error about one key names the option that set it (``origins``), else ``where``."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{section} must be a mapping of keys to values; got {short(raw)} "
                          f"({_origin(section, where, origins)})")
    _refuse_unknown(raw, schema, "key", f"{section}.", where, origins)
    out = {}
    for key, option in schema.items():
        if isinstance(option, dict):
            out[key] = _check_section(raw.get(key), option, f"{section}.{key}", where,
                                      origins)
        elif key in raw:
            out[key] = option.check(raw[key], f"{section}.{key}",
                                    _origin(f"{section}.{key}", where, origins))
        elif option.required:
            raise ConfigError(f"{section}.{key} is required: {option.describe()} ({where})")
        else:
            out[key] = copy.deepcopy(option.default)
    return out


class Catalogue(Protocol):
    """The algorithms a config may name, as the layer above (``topictk.inference.registry``)
    provides them: validation is given the catalogue rather than importing it."""

    def algorithm_names(self) -> list[str]: ...

    def get_driver(self, name: str) -> Any:
        """An object with ``traits`` (what it can do: ``family``, ``cluster``,
        ``alpha_auto``, ...), ``OPTIONS`` (key -> :class:`Option`),
        ``check_config(data, where)``, ``memory_arrays(data, counts)`` (the arrays a run
        holds) and ``MEMORY_FIX`` (what else to do when they do not fit)."""


def _model_schema(raw: dict, catalogue: Catalogue) -> dict:
    """The keys of the model section: those of ``model.family``, or of the algorithm's family
    when no family is given (``inference.algorithm: tlasgr`` implies ``family: dlda``)."""
    model, inf = raw.get("model"), raw.get("inference")
    family = model.get("family") if isinstance(model, dict) else None
    if (family is None and isinstance(inf, dict)
            and inf.get("algorithm") in catalogue.algorithm_names()):
        family = catalogue.get_driver(inf["algorithm"]).traits.family
    # a family that is not a string (a list, a mapping) is refused by the family key's check
    return MODEL_FAMILIES.get(family, MODEL) if isinstance(family, str) else MODEL


def _check_family(family: str, algorithm: str, where: str, catalogue: Catalogue) -> None:
    """Refuse an algorithm that does not train ``model.family`` (model.family: dmr with
    inference.algorithm gibbs would silently train plain LDA)."""
    get_driver = catalogue.get_driver
    trains = get_driver(algorithm).traits.family
    if family == trains or family in get_driver(algorithm).traits.families:
        return
    names = catalogue.algorithm_names()
    if (family == "dlda") != (trains == "dlda"):
        if trains == "dlda":
            fix = "trains deep LDA: set model.family: dlda and model.layers"
        else:
            deep = ", ".join(n for n in names if get_driver(n).traits.family == "dlda")
            fix = f"does not train deep LDA (model.family: dlda); use one of {deep}"
        raise ConfigError(f"inference.algorithm {short(algorithm)} {fix} ({where})")
    fitting = ", ".join(n for n in names if family in (get_driver(n).traits.family,
                                                       *get_driver(n).traits.families))
    raise ConfigError(f"inference.algorithm {short(algorithm)} trains model.family {trains}, the "
                      f"config says {family}; use one of {fitting} or set model.family: "
                      f"{trains} ({where})")


def _check_alpha(model: dict, algorithm: str, where: str, catalogue: Catalogue) -> None:
    """Refuse ``model.alpha: auto`` for an algorithm that does not learn alpha (its traits
    say ``alpha_auto``), naming those that do."""
    if model.get("alpha") != "auto" or catalogue.get_driver(algorithm).traits.alpha_auto:
        return
    able = [name for name in catalogue.algorithm_names()
            if catalogue.get_driver(name).traits.alpha_auto]
    raise ConfigError(f"model.alpha: auto is not available for {algorithm}; give a number "
                      f"(the algorithms that learn alpha: {', '.join(able)}) ({where})")


def _resolve_seeds(model: dict, base_dir: Path, where: str) -> None:
    """``model.seed_file`` read into ``model.seed_words`` (the path resolved and kept beside the
    words: the run's config holds the words it trained with, whatever becomes of the file);
    with both given, the words are those of ``model.seed_words`` and the file is not read.
    The seeded topics checked against ``model.topics``."""
    if model.get("seed_file") is not None:
        path = (base_dir / model["seed_file"]).resolve()
        if model.get("seed_words") is None:
            model["seed_words"] = read_seed_file(path)
        model["seed_file"] = str(path)
    seeds = model.get("seed_words")
    if not seeds:       # the seed settings do nothing: the run's config leaves them out
        for key in SEED_KEYS:
            model.pop(key, None)
        return
    topics = model.get("topics")
    if isinstance(topics, int) and len(seeds) > topics:
        raise ConfigError(f"model.seed_words: {len(seeds)} seeded topics but model.topics is "
                          f"{topics}; raise model.topics or give fewer labels ({where})")
    if model.get("residual_topic") and isinstance(topics, int) and len(seeds) >= topics:
        raise ConfigError(f"model.residual_topic: true needs an unseeded topic, but all "
                          f"{topics} topics are seeded; raise model.topics to "
                          f"{len(seeds) + 1} ({where})")


def validate(raw: dict, where: str, base_dir: Path, catalogue: Catalogue,
             origins: Mapping[str, str] = {}) -> Config:     # noqa: B006 (read only)
    """Check every key of a raw config mapping against ``catalogue`` and return the resolved
    :class:`Config`. ``origins`` maps dotted keys set on the command line to the option that
    set them (``--set model.topics=abc``): an error about such a key names the option, not
    the config file ``where``."""
    algorithm_names, get_driver = catalogue.algorithm_names, catalogue.get_driver

    if not isinstance(raw, dict):
        raise ConfigError(f"the config must be a YAML mapping with sections "
                          f"{', '.join(TOP_LEVEL)} ({where})")
    _refuse_unknown(raw, TOP_LEVEL, "section", "", where, origins)
    for key in ("corpus", "output"):
        value = raw.get(key)
        source = _origin(key, where, origins)
        if isinstance(value, dict) and set(value) == {"path"}:
            value = value["path"]
        if isinstance(value, (bool, int, float)):
            kind = "boolean" if isinstance(value, bool) else "number"
            raise ConfigError(f"{key} must be a path; got {short(value)}, which YAML reads as "
                              f"a {kind}: put the path in quotes ({source})")
        if not isinstance(value, str) or not value:
            what = ("the corpus store, as written by topictk prepare --out STORE"
                    if key == "corpus" else "the run directory to write")
            raise ConfigError(f"{key} is required: a path, {what} ({source})")
        if "\x00" in value:
            raise ConfigError(f"{key} must be a path; got {short(value)}, which holds a NUL "
                              f"character ({source})")
        raw[key] = value
    # a family the algorithm does not train is reported before the keys of either section:
    # the keys of the intended family (inference.sigma2 of DMR with algorithm gibbs,
    # model.layers of deep LDA with family lda) would otherwise be reported as unknown
    model_raw, inf_raw = raw.get("model"), raw.get("inference")
    family = model_raw.get("family") if isinstance(model_raw, dict) else None
    algorithm = inf_raw.get("algorithm") if isinstance(inf_raw, dict) else None
    if family in MODEL["family"].choices and algorithm in algorithm_names():
        _check_family(family, algorithm, where, catalogue)
    model = _check_section(model_raw, _model_schema(raw, catalogue), "model", where, origins)
    _resolve_seeds(model, base_dir, _origin("model.seed_file", where, origins))

    inf_raw = raw.get("inference") or {}
    if not isinstance(inf_raw, dict):
        raise ConfigError(f"inference must be a mapping of keys to values "
                          f"({_origin('inference', where, origins)})")
    names = algorithm_names()
    algorithm = inf_raw.get("algorithm")
    if algorithm is None:
        raise ConfigError(f"inference.algorithm is required: one of {', '.join(names)} ({where})")
    if algorithm not in names:
        close = difflib.get_close_matches(str(algorithm), names, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"inference.algorithm must be one of {', '.join(names)}; got "
                          f"{short(algorithm)} ({_origin('inference.algorithm', where, origins)})"
                          f"{hint}")
    driver_cls = get_driver(algorithm)
    _check_family(model["family"], algorithm, where, catalogue)  # also without model.family
    schema = dict(INFERENCE_COMMON)
    schema["algorithm"] = Option("choice", algorithm, choices=tuple(names))
    schema.update(driver_cls.OPTIONS)
    inference = _check_section(inf_raw, schema, "inference", where, origins)
    training = _check_section(raw.get("training"), TRAINING, "training", where, origins)
    training["threads"] = resolve_threads(training["threads"], "training.threads")
    evaluation = _check_section(raw.get("evaluation"), EVALUATION, "evaluation", where,
                                origins)
    if evaluation["fold_in_burn_in"] >= evaluation["fold_in_sweeps"]:
        raise ConfigError(f"evaluation.fold_in_burn_in must be < evaluation.fold_in_sweeps "
                          f"({evaluation['fold_in_sweeps']}); got {evaluation['fold_in_burn_in']} "
                          f"({where})")
    data = {
        "corpus": str((base_dir / raw["corpus"]).resolve()),
        "output": str((base_dir / raw["output"]).resolve()),
        "model": model, "inference": inference, "training": training, "evaluation": evaluation,
    }
    if model["family"] == "hdp":
        _resolve_max_topics(model, data["corpus"])
    _check_cluster(training, algorithm, where, catalogue)
    _check_alpha(model, algorithm, where, catalogue)
    driver_cls.check_config(data, where)
    _resolve_evaluation(data, driver_cls, where)
    config = Config(data, None)
    config.memory_estimate = _check_memory(data, where, driver_cls)
    return config


# the in-training curve scores this many test documents, evenly spread: a share of the
# store's training documents, at least / at most these many, never more than the store's test
# documents. It depends on the store alone, so every run of a store is estimated on the same
# documents and its curves can be laid side by side (docs/algorithms.md §11.2)
CURVE_SHARE = 0.02
CURVE_DOCS_MIN, CURVE_DOCS_MAX = 50, 1000
# evaluations of a run with training.eval_every: auto (deep LDA: every 10 steps, a schedule
# that does not move when a run is extended, since its test chain advances on it)
CURVE_POINTS = 10
PERSISTENT_EVAL_EVERY = 10


def _resolve_evaluation(data: dict, driver_cls: Any, where: str) -> None:
    """``training.eval_every: auto`` and ``evaluation.curve_docs: auto`` as numbers: the first
    from the iterations, the second from the store's counts alone."""
    training, evaluation, inference = data["training"], data["evaluation"], data["inference"]
    iterations = int(inference["iterations"])
    if training["eval_every"] == "auto":
        training["eval_every"] = (PERSISTENT_EVAL_EVERY
                                  if driver_cls.traits.persistent_evaluation
                                  else max(1, iterations // CURVE_POINTS))
    # resolved from the config and the store alone, never from where the run trains: a run
    # on a Dask cluster scores the curve documents of the same run on one machine
    whole = driver_cls.traits.persistent_evaluation or driver_cls.traits.features
    if whole:
        if evaluation["curve_docs"] not in ("auto", None):
            raise ConfigError(f"evaluation.curve_docs must be null for this run (its curve "
                              f"scores every test document: deep LDA and DMR runs); "
                              f"got {evaluation['curve_docs']} ({where})")
        evaluation["curve_docs"] = None
        return
    if evaluation["curve_docs"] != "auto":
        return
    counts = _store_counts(data["corpus"])
    if counts is None:          # no store: opening it will say so
        evaluation["curve_docs"] = CURVE_DOCS_MAX
        return
    evaluation["curve_docs"] = curve_docs_of_store(counts)


def curve_docs_of_store(counts: dict) -> int:
    """``evaluation.curve_docs: auto`` for a store with these manifest ``counts``: the same for
    every run of the store, whatever its algorithm, iterations or evaluation schedule."""
    wanted = min(CURVE_DOCS_MAX, max(CURVE_DOCS_MIN,
                                     int(CURVE_SHARE * int(counts["train_documents"]))))
    return max(1, min(wanted, int(counts["test_documents"])))


#: model.max_topics: auto without a readable store (opening the store then says what is wrong)
MAX_TOPICS_NO_STORE = 100


def _resolve_max_topics(model: dict, corpus: str) -> None:
    """``model.max_topics`` of the hierarchical Dirichlet process as a number, and
    ``model.topics`` (the K of its arrays) equal to it: ``auto`` is model.topics when given
    (a saved run's config), else min(V, ceil(4 sqrt(D))) of the store's counts alone; and
    ``model.initial_topics: auto`` as ceil(K_max / 4) (docs/algorithms.md §2.15, "Start")."""
    if model["max_topics"] == "auto":
        if model.get("topics") is not None:
            model["max_topics"] = int(model["topics"])
        else:
            counts = _store_counts(corpus)
            model["max_topics"] = (MAX_TOPICS_NO_STORE if counts is None else max(2, min(
                counts["vocabulary"], math.ceil(4 * math.sqrt(counts["train_documents"])))))
    model["topics"] = int(model["max_topics"])
    if model.get("initial_topics") == "auto":
        model["initial_topics"] = initial_hdp_topics(model["topics"])


def _store_counts(corpus: str) -> dict | None:
    """The counts in the manifest of the corpus store at ``corpus``, or None when there is no
    readable one (opening the store then says what is wrong)."""
    try:
        manifest = json_loads((Path(corpus) / "manifest.json").read_bytes())
        counts = manifest["counts"]
        found = {key: int(counts[key])
                 for key in ("vocabulary", "train_documents", "test_documents")}
        for key in ("train_tokens", "test_observed_tokens"):    # for the memory estimate
            found[key] = int(counts.get(key, 0))
        # the time slices (prepare --time-column): the dynamic topic model holds K x V per slice
        found["time_slices"] = len((manifest.get("time") or {}).get("labels") or ())
        # and the stored (document, word) pairs: CVB keeps K values for each training pair
        arrays = manifest.get("arrays", {})
        for key, name in (("train_pairs", "train_indices"),
                          ("test_observed_pairs", "test_obs_indices"),
                          ("train_heldout_pairs", "train_held_indices")):
            found[key] = int((arrays.get(name) or {}).get("shape", [0])[0])
        return found
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            UnicodeDecodeError):
        return None


def dense_arrays(model: dict, counts: dict) -> list[tuple[str, tuple[int, ...], int]]:
    """The dense arrays every algorithm holds for ``model`` on a store with ``counts``, as
    (name, shape, bytes per element): topic-word counts or parameters (K x V), the layers'
    topic-topic matrices of deep models, and document-topic rows of the training and test
    documents (D x K), all 8-byte (int64 counts, float64 parameters) as the states allocate
    them; more per algorithm (copies, samples) comes on top."""
    layers = [int(k) for k in (model.get("layers") or [model["topics"]])]
    arrays = [("topic-word", (layers[0], counts["vocabulary"]), 8)]
    for lower, upper in itertools.pairwise(layers):
        arrays.append(("topic-topic", (upper, lower), 8))
    arrays.append(("document-topic", (counts["train_documents"], sum(layers)), 8))
    if counts["test_documents"]:
        arrays.append(("test document-topic", (counts["test_documents"], sum(layers)), 8))
    return arrays


def _check_memory(data: dict, where: str, driver_cls: Any) -> int | None:
    """Refuse a run whose large arrays (as its driver counts them: ``memory_arrays``) cannot
    fit in the memory this process is allowed (:func:`topictk.limits.memory_limit`), before
    anything is written; returns the estimate in bytes (None without a store to count)."""
    counts = _store_counts(data["corpus"])
    if counts is None:
        return None
    arrays = driver_cls.memory_arrays(data, counts)
    shortfall = memory_shortfall(arrays)
    if shortfall is not None:
        key = "model.layers" if data["model"].get("layers") else "model.topics"
        value = data["model"].get("layers") or data["model"]["topics"]
        raise ConfigError(f"{key} = {short(value)} {shortfall}; lower {key}, "
                          f"{driver_cls.MEMORY_FIX}, or train where more memory is allowed "
                          f"({where})")
    return dense_bytes(arrays)


# the schemes a Dask client connects to a scheduler in another process by (``inproc``
# reaches a scheduler in the same process only, which topictk never starts)
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")
_SCHEDULER = re.compile(r"^(?:(?P<scheme>[^/]*)://)?(?P<host>\[[^\]]*\]|[^\s/:\[\]]*)"
                        r"(?::(?P<port>[^/]*))?/?$")


def scheduler_problem(address: Any) -> str | None:
    """None when ``address`` is a Dask scheduler address topictk can connect to (a scheme
    Dask supports, a host, a port 1-65535), else what is wrong with it and the fix: checked
    before any connection, so that a mistyped address fails at once instead of after the
    timeout (or inside Dask)."""
    example = "such as tcp://HOST:8786"
    if not isinstance(address, str):
        return f"must be a scheduler address {example}; got {short(address)}"
    found = _SCHEDULER.match(address.strip())
    if found is None:
        return f"must be a scheduler address {example}; got {short(address)}"
    scheme, host, port = found.group("scheme"), found.group("host"), found.group("port")
    if scheme is not None and scheme.lower() not in SCHEDULER_SCHEMES:
        return (f"{short(address)} has the scheme {short(scheme)}, which Dask does not connect "
                f"by; use one of {', '.join(s + '://' for s in SCHEDULER_SCHEMES)}")
    if not host or host == "[]":
        return f"{short(address)} names no host; give an address {example}"
    if not port:
        return (f"{short(address)} names no port; add the scheduler's port (8786 unless "
                f"'dask scheduler --port' set another), e.g. tcp://{host}:8786")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return (f"{short(address)} has the port {short(port)}, which is not a port number "
                f"from 1 to 65535; give the port 'dask scheduler' printed (8786 by default)")
    return None


def _check_cluster(training: dict, algorithm: str, where: str, catalogue: Catalogue) -> None:
    """training.scheduler and training.dask_workers exclude each other, and only algorithms
    whose driver runs its shards on a cluster take them."""
    if training["scheduler"] is not None and training["dask_workers"] is not None:
        raise ConfigError(f"training.scheduler and training.dask_workers exclude each other: "
                          f"run on the scheduler's cluster or on a local one ({where})")
    address = training["scheduler"]
    problem = None if address is None else scheduler_problem(address)
    if problem is not None:
        raise ConfigError(f"training.scheduler {problem} ({where})")
    if training["dask_workers"] is not None:
        problem = local_workers_problem(training["dask_workers"])
        if problem is not None:
            raise ConfigError(f"training.dask_workers: {problem} ({where})")
    key = ("training.scheduler" if training["scheduler"] is not None
           else "training.dask_workers" if training["dask_workers"] is not None else None)
    if key is None or catalogue.get_driver(algorithm).traits.cluster:
        return
    able = [name for name in catalogue.algorithm_names()
            if catalogue.get_driver(name).traits.cluster]
    raise ConfigError(f"{key}: inference.algorithm {algorithm} does not run on a Dask cluster; "
                      f"the algorithms that do: {', '.join(able)} ({where})")


STDIN = "-"
_stdin_read: list = [None, ""]       # the standard input stream last read, and its text


def _stdin_text() -> str:
    """Standard input, read once: a sweep loads its config once per run. The stream is kept
    with its text, so a new stream (another command in the same process) is read anew."""
    if _stdin_read[0] is not sys.stdin:
        _stdin_read[:] = [sys.stdin, sys.stdin.read()]
    return _stdin_read[1]


def _read_yaml(path: Path) -> Any:
    """The YAML document of a config file, or of standard input when ``path`` is ``-``."""
    name = "<stdin>" if str(path) == STDIN else str(path)
    if str(path) != STDIN and not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        text = _stdin_text() if str(path) == STDIN else path.read_text(encoding="utf-8")
        raw = yaml.load(text, Loader=_Loader)
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read ({exc.strerror or exc}); give a readable "
                          f"YAML config file") from None
    except RecursionError:
        raise ConfigError(f"{name}: invalid YAML (nested too deeply); a config nests "
                          f"sections a few levels deep") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: not a UTF-8 text file; give a YAML config") from None
    except DuplicateKeyError as exc:
        raise ConfigError(f"{name}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = one_line(getattr(exc, "problem", None) or exc)
        raise ConfigError(f"{name}:{line} invalid YAML ({problem})") from None
    except (ValueError, TypeError, OverflowError) as exc:
        # a value that contradicts its explicit tag (``!!float abc``) is not a YAMLError
        raise ConfigError(f"{name}: invalid YAML ({one_line(exc)})") from None
    if raw is None:
        raise ConfigError(f"{name}: config file is empty; it needs corpus, model, "
                          f"inference and output")
    return raw


_KEY = re.compile(r"(?<![\w.])(?:model|inference|training|evaluation)(?:\.\w+)+")


def _naming_overrides(exc: ConfigError, where: str, origins: Mapping[str, str]) -> ConfigError:
    """``exc`` naming the options that set keys it mentions, beside the config ``where``
    unless every key it mentions was set so: a check of several keys (inference.burn_in
    against inference.iterations) would blame the config file alone although a value came
    from the command line."""
    message = str(exc)
    if f"({where})" not in message:
        return exc
    given = {key: _origin(key, "", origins) for key in _KEY.findall(message)}
    named = list(dict.fromkeys(option for option in given.values() if option))
    if not named:
        return exc
    source = ", ".join(named) if all(given.values()) else f"{where} with {', '.join(named)}"
    return ConfigError(message.replace(f"({where})", f"({source})", 1))


def load_config(path: str | Path | None, overrides: list[str] = (),
                raw: dict | None = None, *, catalogue: Catalogue,
                labels: Mapping[str, str] | None = None) -> Config:
    """Read a YAML config (``-``: standard input), apply ``--set`` overrides, validate against
    ``catalogue``. Paths in the config are relative to its file, or to the working directory
    for standard input and a ``raw`` mapping. An error about an overridden key names the
    option that set it: ``labels`` maps an override to the option the user gave (``--out
    DIR`` for ``output=DIR``), by default ``--set OVERRIDE``. Raises :class:`ConfigError`."""
    stdin = raw is None and str(path) == STDIN
    if raw is None:
        path = Path(path)
        raw = _read_yaml(path)
        where = "<stdin>" if stdin else str(path)
        base_dir = Path.cwd() if stdin else path.resolve().parent
    else:
        where = "<config>"
        base_dir = Path.cwd()
    raw = copy.deepcopy(raw)
    if not isinstance(raw, dict):
        raise ConfigError(f"the config must be a YAML mapping ({where})")
    origins: dict[str, str] = {}
    for text in overrides:
        parts, value = parse_override(text)
        _apply_override(raw, parts, value)
        origins[".".join(parts)] = (labels or {}).get(text) or f"--set {short(text, 100)[1:-1]}"
    try:
        config = validate(raw, where, base_dir, catalogue, origins)
    except ConfigError as exc:
        raise _naming_overrides(exc, where, origins) from None
    config.source = Path(path) if path is not None and not stdin else None
    folder = Path(path).parent if config.source is not None else None
    config.shown = {key: shown_path(raw[key], folder) for key in ("corpus", "output")}
    return config


def shown_path(value: str | Path, folder: str | Path | None) -> str:
    """A path of a config as messages show it: ``value`` itself when absolute or when the
    config has no folder (standard input, a mapping), else joined to the config's ``folder``
    as typed, without resolving links or the working directory (``exp/a.yaml`` with ``output:
    ../runs/x`` shows ``runs/x``)."""
    text = str(value)
    if folder is None or Path(text).is_absolute():
        return os.path.normpath(text)
    return os.path.normpath(Path(folder) / text)
