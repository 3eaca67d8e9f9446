"""Several runs at once: a RUN argument that names one run directory or a folder of runs (the
output of ``train --sweep``), and the check that runs were trained on one corpus store.

Runs of different stores are scored on different held-out tokens: their perplexities measure
different things and cannot be ranked. :func:`check_same_store` refuses them, or with
``allow_different`` says that the perplexity column is not comparable.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from topictk.config.loader import Config
from topictk.corpus.union import heldout_id
from topictk.errors import CorpusUsageError, UsageError
from topictk.evaluation.run import not_a_run_error
from topictk.inference.registry import load_config
from topictk.limits import json_loads
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.guard import is_run, read_marker
from topictk.rundir.layout import MODEL_FILE
from topictk.rundir.metrics import read_metrics


@dataclass(frozen=True)
class RunRef:
    """A run directory found by :func:`discover_runs`.

    Attributes
    ----------
    path : Path
        The run directory.
    label : str
        A short name to show: the folder name, or the path given when names repeat.
    config : Config
        The run's resolved config.
    corpus_id : str or None
        The id of the store it was trained on (None when neither its marker nor its store
        tells).
    """

    path: Path
    label: str
    config: Config

    @property
    def corpus_id(self) -> str | None:
        marker = read_marker(self.path)
        if marker and marker.get("corpus_id"):
            return str(marker["corpus_id"])
        try:
            return str(json_loads((self.config.corpus / "manifest.json").read_bytes())
                       ["corpus_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @property
    def heldout_id(self) -> str | None:
        """The id of the held-out tokens it is scored on (:func:`topictk.corpus.union.heldout_id`:
        the same for a run and the runs continued from it with added documents); its corpus
        id when its store's manifest cannot be read."""
        try:
            manifest = json_loads((self.config.corpus / "manifest.json").read_bytes())
        except (OSError, ValueError, TypeError):
            return self.corpus_id
        return (heldout_id(manifest) if isinstance(manifest, dict) else None) or self.corpus_id

    @property
    def complete(self) -> bool:
        """Whether training has written the final model."""
        return (self.path / MODEL_FILE).is_file()

    def missing(self) -> str | None:
        """What the run lacks to be scored, and the fix; None when it has its final model."""
        if self.complete:
            return None
        steps = [s for s, _ in ckpt.list_checkpoints(self.path / "checkpoints")]
        config = self.path / "config.yaml"
        if steps:
            return (f"{self.path}: no final model yet (checkpoints up to step {steps[-1]}); "
                    f"finish it with 'topictk train --config {config} --resume'")
        return (f"{self.path}: no final model and no checkpoint yet; train it with "
                f"'topictk train --config {config} --force'")

    def metrics(self) -> list[dict]:
        """The records of the run's ``metrics.jsonl`` (empty when it has none yet)."""
        return read_metrics(self.path / "metrics.jsonl")


def _natural_key(name: str) -> list:
    """Sort key that puts ``model.topics=20`` before ``model.topics=100``."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", name)]


def discover_runs(paths: Sequence[str | Path]) -> list[RunRef]:
    """The runs named by ``paths``, in a stable order.

    Parameters
    ----------
    paths : sequence of str or Path
        Each a run directory, or a folder whose sub-folders are runs (such as the output of
        ``topictk train --sweep``), which stands for those runs in the natural order of their
        names (numbers by value).

    Returns
    -------
    list of RunRef
        One per run, in the order given (a folder's runs where the folder is); a run named
        twice is listed once.

    Raises
    ------
    UsageError
        When a path is missing, or is neither a run nor a folder holding runs.
    """
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise UsageError(f"{path}: no such run directory; give the output folder of "
                             f"'topictk train' or a folder of runs")
        if is_run(path) or (path / "config.yaml").is_file():
            found.append(path)
            continue
        inner = sorted((p for p in path.iterdir() if p.is_dir() and is_run(p)),
                       key=lambda p: _natural_key(p.name))
        if not inner:
            raise UsageError(f"{path}: neither a run directory nor a folder of runs (no "
                             f"config.yaml in it or in its sub-folders); give the output folder "
                             f"of 'topictk train'")
        found.extend(inner)
    unique: list[Path] = []
    seen = set()
    for path in found:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(path)
    for path in unique:
        if not (path / "config.yaml").is_file():
            raise not_a_run_error(path)
    names = [p.name for p in unique]
    return [RunRef(path=p, label=p.name if names.count(p.name) == 1 else str(p),
                   config=load_config(p / "config.yaml")) for p in unique]


def check_same_store(runs: Sequence[RunRef], allow_different: bool = False) -> bool:
    """Whether the runs' perplexities are comparable: they were trained on one corpus store,
    or on stores with the same held-out tokens (a run and the runs continued from it with
    added documents: :attr:`RunRef.heldout_id`).

    Parameters
    ----------
    runs : sequence of RunRef
    allow_different : bool
        Accept runs of different stores (``--allow-different-corpora``); the caller marks
        their perplexities as not comparable.

    Returns
    -------
    bool
        True when every run was trained on the same store.

    Raises
    ------
    CorpusUsageError
        When the stores differ and ``allow_different`` is False; the message names two runs
        of different stores and says why they are not compared.
    """
    first = runs[0] if runs else None
    for run in runs[1:]:
        if run.heldout_id is None or run.heldout_id != first.heldout_id:
            if allow_different:
                return False
            raise CorpusUsageError(
                f"{first.path} and {run.path} were trained on different corpus stores "
                f"({first.config.corpus}, {run.config.corpus}): their perplexities are "
                f"computed on different held-out tokens and cannot be compared; compare runs of "
                f"one store, or add --allow-different-corpora to show them with the perplexity "
                f"marked as not comparable")
    return True


def scored_with(runs: Sequence[RunRef], fold_in: str | None) -> list[RunRef]:
    """The runs with ``evaluation.fold_in`` set to ``fold_in`` (None: as they are), so that
    every run is scored by one estimator of theta; a run whose family cannot use it is
    refused with its config's name."""
    if fold_in is None:
        return list(runs)
    return [replace(run, config=load_config(run.path / "config.yaml",
                                            [f"evaluation.fold_in={fold_in}"]))
            for run in runs]


def protocol_differences(runs: Sequence[RunRef], left_to_right: int | None = None) -> list[str]:
    """What differs between the runs' held-out scores, one line each: the corpus store (other
    held-out tokens) and every evaluate setting (fold-in, its sweeps, ...) whose value is not
    the same for all, with the runs of each value. Empty when their scores can be ranked."""
    from topictk.evaluation.scores import protocol

    def listed(values: dict) -> str:
        return "; ".join(f"{value} ({', '.join(names)})" for value, names in values.items())

    out = []
    stores: dict[str, list[str]] = {}
    shown: dict[str, str] = {}
    for run in runs:
        key = run.heldout_id or "?"
        shown.setdefault(key, f"{run.config.corpus} [{(run.corpus_id or '?')[:12]}]")
        stores.setdefault(key, []).append(run.label)
    if len(stores) > 1:
        out.append(f"corpus store: {listed({shown[k]: v for k, v in stores.items()})}")
    settings: dict[str, dict[str, list[str]]] = {}
    for run in runs:
        for key, value in protocol(run.config, left_to_right).items():
            settings.setdefault(key, {}).setdefault(str(value), []).append(run.label)
    for key, values in settings.items():
        if len(values) > 1:
            out.append(f"evaluation.{key}: {listed(values)}")
    return out
