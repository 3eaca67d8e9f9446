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
from topictk.inference.base import Driver

# inference.algorithm -> the module whose @register class implements it
ALGORITHMS: dict[str, str] = {
    "gibbs": "topictk.inference.gibbs",
    "vb": "topictk.inference.vb",
    "cvb": "topictk.inference.cvb",
    "cvb0": "topictk.inference.cvb",
    "ovb": "topictk.inference.ovb",
    "hsvg": "topictk.inference.hsvg",
    "sgrld": "topictk.inference.sgrld",
    "tlasgr": "topictk.inference.dlda",
    "tlfsgr": "topictk.inference.dlda",
    "dlda-sgrld": "topictk.inference.dlda",
    "dlda-gibbs": "topictk.inference.dlda",
    "dmr-sem": "topictk.inference.dmr",
    "dmr-sgrld": "topictk.inference.dmr",
    "pem": "topictk.inference.pem",
}

_DRIVERS: dict[str, type[Driver]] = {}


def register(cls: type[Driver]) -> type[Driver]:
    """Class decorator: make ``cls`` available as ``inference.algorithm: cls.name``."""
    _DRIVERS[cls.name] = cls
    return cls


def algorithm_names() -> list[str]:
    return sorted(ALGORITHMS)


def get_driver(name: str) -> type[Driver]:
    if name not in _DRIVERS:
        importlib.import_module(ALGORITHMS[name])
    return _DRIVERS[name]


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
    whether it uses threads, resumes and runs on a cluster, and its papers (the facts each
    driver class declares)."""
    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    rows = [("algorithm", "model", "family", "threads", "resume", "cluster", "paper")]
    for name in algorithm_names():
        d = get_driver(name)
        rows.append((name, d.family, d.kind, yes(d.threads_support), yes(d.resume_support),
                     yes(d.cluster_support), d.paper))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1]
            for row in rows]
