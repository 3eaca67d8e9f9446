"""Load, override and validate an experiment config before any work starts."""
from __future__ import annotations

import copy
import difflib
import re
from pathlib import Path
from typing import Any, Mapping, Protocol

import yaml

from topictk.config.schema import (
    EVALUATION,
    INFERENCE_COMMON,
    MODEL,
    MODEL_FAMILIES,
    TOP_LEVEL,
    TRAINING,
    Option,
)
from topictk.errors import ConfigError


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-3`` as a number. PyYAML follows YAML 1.1, whose floats
    need a dot, so ``beta: 1e-3`` or ``--set model.beta=1e-3`` would be the string '1e-3'."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


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
        raise ConfigError(f"--set expects section.key=value; got {text!r}")
    key, _, raw = text.partition("=")
    parts = [p for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise ConfigError(f"--set expects section.key=value; got {text!r}")
    try:
        value = yaml.load(raw, Loader=_Loader) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
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


def _check_section(raw: Any, schema: dict, section: str, where: str) -> dict:
    """Validate one mapping against ``schema`` (values are Options or nested schemas)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{section} must be a mapping of keys to values; got {raw!r} ({where})")
    for key in raw:
        if key not in schema:
            raise ConfigError(f"unknown key '{section}.{key}' ({where})"
                              f"{_suggest(str(key), list(schema))}")
    out = {}
    for key, option in schema.items():
        if isinstance(option, dict):
            out[key] = _check_section(raw.get(key), option, f"{section}.{key}", where)
        elif key in raw:
            out[key] = option.check(raw[key], f"{section}.{key}", where)
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
        """An object with ``family``, ``OPTIONS`` (key -> :class:`Option`) and
        ``check_config(data, where)``."""


def _model_schema(raw: dict, catalogue: Catalogue) -> dict:
    """The keys of the model section: those of ``model.family``, or of the algorithm's family
    when no family is given (``inference.algorithm: tlasgr`` implies ``family: dlda``)."""
    model, inf = raw.get("model"), raw.get("inference")
    family = model.get("family") if isinstance(model, dict) else None
    if (family is None and isinstance(inf, dict)
            and inf.get("algorithm") in catalogue.algorithm_names()):
        family = catalogue.get_driver(inf["algorithm"]).family
    return MODEL_FAMILIES.get(family, MODEL)


def _check_family(family: str, algorithm: str, where: str, catalogue: Catalogue) -> None:
    """Refuse an algorithm that does not train ``model.family`` (model.family: dmr with
    inference.algorithm gibbs would silently train plain LDA)."""
    get_driver = catalogue.get_driver
    trains = get_driver(algorithm).family
    if family == trains:
        return
    names = catalogue.algorithm_names()
    if (family == "dlda") != (trains == "dlda"):
        if trains == "dlda":
            fix = "trains deep LDA: set model.family: dlda and model.layers"
        else:
            deep = ", ".join(n for n in names if get_driver(n).family == "dlda")
            fix = f"does not train deep LDA (model.family: dlda); use one of {deep}"
        raise ConfigError(f"inference.algorithm {algorithm!r} {fix} ({where})")
    fitting = ", ".join(n for n in names if get_driver(n).family == family)
    raise ConfigError(f"inference.algorithm {algorithm!r} trains model.family {trains}, the "
                      f"config says {family}; use one of {fitting} or set model.family: "
                      f"{trains} ({where})")


def validate(raw: dict, where: str, base_dir: Path, catalogue: Catalogue) -> Config:
    """Check every key of a raw config mapping against ``catalogue`` and return the resolved
    :class:`Config`."""
    algorithm_names, get_driver = catalogue.algorithm_names, catalogue.get_driver

    if not isinstance(raw, dict):
        raise ConfigError(f"the config must be a YAML mapping with sections "
                          f"{', '.join(TOP_LEVEL)} ({where})")
    for key in raw:
        if key not in TOP_LEVEL:
            raise ConfigError(f"unknown section '{key}' ({where})"
                              f"{_suggest(str(key), list(TOP_LEVEL))}")
    for key in ("corpus", "output"):
        value = raw.get(key)
        if isinstance(value, dict) and set(value) == {"path"}:
            value = value["path"]
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{key} is required: a path ({where})")
        raw[key] = value
    # a family the algorithm does not train is reported before the keys of either section:
    # the keys of the intended family (inference.sigma2 of DMR with algorithm gibbs,
    # model.layers of deep LDA with family lda) would otherwise be reported as unknown
    model_raw, inf_raw = raw.get("model"), raw.get("inference")
    family = model_raw.get("family") if isinstance(model_raw, dict) else None
    algorithm = inf_raw.get("algorithm") if isinstance(inf_raw, dict) else None
    if family in MODEL["family"].choices and algorithm in algorithm_names():
        _check_family(family, algorithm, where, catalogue)
    model = _check_section(model_raw, _model_schema(raw, catalogue), "model", where)

    inf_raw = raw.get("inference") or {}
    if not isinstance(inf_raw, dict):
        raise ConfigError(f"inference must be a mapping of keys to values ({where})")
    names = algorithm_names()
    algorithm = inf_raw.get("algorithm")
    if algorithm is None:
        raise ConfigError(f"inference.algorithm is required: one of {', '.join(names)} ({where})")
    if algorithm not in names:
        close = difflib.get_close_matches(str(algorithm), names, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"inference.algorithm must be one of {', '.join(names)}; got "
                          f"{algorithm!r} ({where}){hint}")
    driver_cls = get_driver(algorithm)
    _check_family(model["family"], algorithm, where, catalogue)  # also without model.family
    schema = dict(INFERENCE_COMMON)
    schema["algorithm"] = Option("choice", algorithm, choices=tuple(names))
    schema.update(driver_cls.OPTIONS)
    inference = _check_section(inf_raw, schema, "inference", where)
    training = _check_section(raw.get("training"), TRAINING, "training", where)
    evaluation = _check_section(raw.get("evaluation"), EVALUATION, "evaluation", where)
    if evaluation["fold_in_burn_in"] >= evaluation["fold_in_sweeps"]:
        raise ConfigError(f"evaluation.fold_in_burn_in must be < evaluation.fold_in_sweeps "
                          f"({evaluation['fold_in_sweeps']}); got {evaluation['fold_in_burn_in']} "
                          f"({where})")
    data = {
        "corpus": str((base_dir / raw["corpus"]).resolve()),
        "output": str((base_dir / raw["output"]).resolve()),
        "model": model, "inference": inference, "training": training, "evaluation": evaluation,
    }
    _check_cluster(training, algorithm, where, catalogue)
    driver_cls.check_config(data, where)
    return Config(data, None)


_SCHEDULER = re.compile(r"^([a-z][a-z0-9+.-]*://)?(\[[0-9a-fA-F:.]+\]|[^\s/:\[\]]+):[0-9]+/?$")


def _check_cluster(training: dict, algorithm: str, where: str, catalogue: Catalogue) -> None:
    """training.scheduler and training.dask_workers exclude each other, and only algorithms
    whose driver runs its shards on a cluster take them."""
    if training["scheduler"] is not None and training["dask_workers"] is not None:
        raise ConfigError(f"training.scheduler and training.dask_workers exclude each other: "
                          f"run on the scheduler's cluster or on a local one ({where})")
    address = training["scheduler"]
    if address is not None and not _SCHEDULER.match(address):
        raise ConfigError(f"training.scheduler must be a scheduler address such as "
                          f"tcp://HOST:8786; got {address!r} ({where})")
    key = ("training.scheduler" if training["scheduler"] is not None
           else "training.dask_workers" if training["dask_workers"] is not None else None)
    if key is None or catalogue.get_driver(algorithm).cluster_support:
        return
    able = [name for name in catalogue.algorithm_names()
            if catalogue.get_driver(name).cluster_support]
    raise ConfigError(f"{key}: inference.algorithm {algorithm} does not run on a Dask cluster; "
                      f"the algorithms that do: {', '.join(able)} ({where})")


def load_config(path: str | Path | None, overrides: list[str] = (),
                raw: dict | None = None, *, catalogue: Catalogue) -> Config:
    """Read a YAML config, apply ``--set`` overrides, validate against ``catalogue``. Raises
    :class:`ConfigError`."""
    if raw is None:
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"{path}: config file not found")
        try:
            text = path.read_text(encoding="utf-8")
            raw = yaml.load(text, Loader=_Loader)
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a UTF-8 text file; give a YAML config") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f" line {mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", exc)
            raise ConfigError(f"{path}:{line} invalid YAML ({problem})") from None
        if raw is None:
            raise ConfigError(f"{path}: config file is empty; it needs corpus, model, "
                              f"inference and output")
        where = str(path)
        base_dir = path.resolve().parent
    else:
        where = "<config>"
        base_dir = Path.cwd()
    raw = copy.deepcopy(raw)
    if not isinstance(raw, dict):
        raise ConfigError(f"the config must be a YAML mapping ({where})")
    for text in overrides:
        parts, value = parse_override(text)
        _apply_override(raw, parts, value)
    config = validate(raw, where, base_dir, catalogue)
    config.source = Path(path) if path is not None else None
    return config
