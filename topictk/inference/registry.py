"""Algorithm name -> driver class.

Driver modules are imported only when their algorithm is asked for, so a run pays (in memory
and start-up time) only for the algorithm it uses.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path

from topictk.config import loader as config_loader
from topictk.config.loader import Config
from topictk.inference.base import REPORT_SECTIONS, Driver

# inference.algorithm -> the module whose @register class implements it
ALGORITHMS: dict[str, str] = {
    "gibbs": "topictk.inference.gibbs.driver",
    "vb": "topictk.inference.variational.vb",
    "cvb": "topictk.inference.variational.cvb",
    "cvb0": "topictk.inference.variational.cvb",
    "ovb": "topictk.inference.variational.ovb",
    "hsvg": "topictk.inference.variational.hsvg",
    "sgrld": "topictk.inference.sgrld.driver",
    "tlasgr": "topictk.inference.dlda.driver",
    "tlfsgr": "topictk.inference.dlda.driver",
    "dlda-sgrld": "topictk.inference.dlda.driver",
    "dlda-gibbs": "topictk.inference.dlda.driver",
    "dmr-sem": "topictk.inference.dmr.driver",
    "dmr-sgrld": "topictk.inference.dmr.driver",
    "pem": "topictk.inference.variational.pem",
    "dtm-sgld": "topictk.inference.dtm.driver",
}

_DRIVERS: dict[str, type[Driver]] = {}
# the algorithms of this package (register_algorithm adds others, unregister_algorithm
# withdraws only those)
_BUILT_IN = frozenset(ALGORITHMS)


def register(cls: type[Driver]) -> type[Driver]:
    """Class decorator: make ``cls`` available as ``inference.algorithm: cls.name``, once its
    declarations hold together (:func:`check_declarations`)."""
    check_declarations(cls)
    _DRIVERS[cls.name] = cls
    return cls


def register_algorithm(name: str, driver_class: type[Driver]) -> type[Driver]:
    """Make ``driver_class``, defined outside this package (a plug-in module, a test), available
    as ``inference.algorithm: name``, as ``@register`` does for the drivers listed in
    ALGORITHMS: its ``name`` must be ``name`` and its declarations must hold together
    (:func:`check_declarations`). Raises ValueError when ``name`` is another driver's
    (docs/extending.md, "Registering")."""
    if getattr(driver_class, "name", None) != name:
        raise TypeError(f"{driver_class!r} is named {getattr(driver_class, 'name', None)!r}, "
                        f"not {name!r}")
    if name in _BUILT_IN or _DRIVERS.get(name, driver_class) is not driver_class:
        raise ValueError(f"inference.algorithm {name!r} is already registered")
    ALGORITHMS[name] = driver_class.__module__
    try:
        return register(driver_class)
    except TypeError:
        del ALGORITHMS[name]
        raise


def unregister_algorithm(name: str) -> None:
    """Withdraw an algorithm added by :func:`register_algorithm` (the built-in ones stay)."""
    if name in _BUILT_IN:
        raise ValueError(f"inference.algorithm {name!r} is built in")
    ALGORITHMS.pop(name, None)
    _DRIVERS.pop(name, None)


def check_declarations(cls: type[Driver]) -> None:
    """Raise TypeError unless ``cls`` is a driver whose name is listed in ALGORITHMS and
    whose traits (``cls.traits``) offer only report sections it implements (it overrides the
    section's method of :class:`Driver`)."""
    if not (isinstance(cls, type) and issubclass(cls, Driver)):
        raise TypeError(f"{cls!r} is not a Driver subclass")
    name = getattr(cls, "name", None)
    if name not in ALGORITHMS:
        raise TypeError(f"{cls.__name__}: name {name!r} is not listed in "
                        f"topictk.inference.registry.ALGORITHMS")
    if cls.traits.time_slices:
        for method in ("slice_topic_word", "slice_prevalence"):
            if getattr(cls, method) is getattr(Driver, method):
                raise TypeError(f"{cls.__name__} declares time_slices but does not implement "
                                f"{method}")
    for section in sorted(cls.traits.report):
        method = REPORT_SECTIONS[section]
        if getattr(cls, method) is getattr(Driver, method):
            raise TypeError(f"{cls.__name__} offers the report section {section!r} but does "
                            f"not implement {method}")


def algorithm_names() -> list[str]:
    return sorted(ALGORITHMS)


def get_driver(name: str) -> type[Driver]:
    if name not in _DRIVERS:
        importlib.import_module(ALGORITHMS[name])
    return _DRIVERS[name]


def driver_class(config: Config) -> type[Driver]:
    """The driver class that trains ``config`` (its ``inference.algorithm``): the one place
    above the config that reads that key to pick the algorithm."""
    return get_driver(config.inference.algorithm)


class _Catalogue:
    """This registry as the catalogue that config validation checks algorithms against."""

    algorithm_names = staticmethod(algorithm_names)
    get_driver = staticmethod(get_driver)


CATALOGUE = _Catalogue()


def load_config(path: str | Path | None, overrides: list[str] = (),
                raw: dict | None = None, labels: Mapping[str, str] | None = None) -> Config:
    """:func:`topictk.config.load_config` against the algorithms registered here."""
    return config_loader.load_config(path, overrides, raw, catalogue=CATALOGUE, labels=labels)


def algorithm_table() -> list[str]:
    """One line per algorithm for ``topictk algorithms``: its name, model family, docs family,
    whether it uses threads, resumes and runs on a cluster, the model families whose runs can
    add documents (``train --continue --add``), and its papers (the facts each
    driver class declares)."""
    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    rows = [("algorithm", "model", "family", "threads", "resume", "cluster", "add docs",
             "paper")]
    for name in algorithm_names():
        traits = get_driver(name).traits
        adds = ",".join(f for f in (traits.family, *traits.families)
                        if f in traits.add_documents) or "no"
        rows.append((name, traits.family, traits.kind, yes(traits.threads),
                     yes(traits.resume), yes(traits.cluster), adds, traits.paper))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1]
            for row in rows]
