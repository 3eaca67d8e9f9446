"""The files of a run directory, and the checks that a saved model belongs to a config.

A run directory holds the marker ``topictk-run.json`` (see :mod:`topictk.rundir.guard`),
``config.yaml``, ``metrics.jsonl``, ``checkpoints/step-*.npz``, ``samples/step-*.npz`` (the
SG-MCMC and Gibbs samples scoring averages over), ``model.npz``, ``scores.json`` (the held-out
scores ``evaluate`` computed, a cache: :mod:`topictk.evaluation.scores`) and the writer's lock
``.topictk.lock`` (:mod:`topictk.rundir.lock`). Training writes them; evaluation, inference and
the topic listings read them.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from topictk.errors import CorpusUsageError, UsageError
from topictk.markers import RUN_MARKER
from topictk.rundir import checkpoint as ckpt

if TYPE_CHECKING:
    from topictk.config.loader import Config
    from topictk.corpus.store import CorpusStore

log = logging.getLogger("topictk")

MODEL_FILE = "model.npz"
SCORES_FILE = "scores.json"


def sample_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "samples" / f"step-{step:08d}.npz"


def save_sample(run_dir: Path, step: int, arrays: dict) -> None:
    ckpt.save_arrays(sample_path(run_dir, step), {"step": step}, arrays)


def check_compatible(header: dict, config: Config, store: CorpusStore, path: Path) -> None:
    """Refuse a checkpoint or model that belongs to another algorithm, K or corpus."""
    if header.get("algorithm") != config.inference.algorithm:
        raise UsageError(f"{path}: was trained with inference.algorithm = "
                         f"{header.get('algorithm')}, the config says "
                         f"{config.inference.algorithm}; use a new output directory")
    if header.get("topics") != config.model.topics:
        raise UsageError(f"{path}: has model.topics = {header.get('topics')}, the config says "
                         f"{config.model.topics}; use a new output directory")
    if header.get("corpus_id") != store.corpus_id:
        raise CorpusUsageError(f"{path}: was trained on another corpus than {store.path} "
                               f"(corpus id differs); point corpus at the store it was trained on")


def retrain_command(run_dir: Path) -> str:
    """The command that trains the run in ``run_dir`` again from the start."""
    return f"'topictk train --config {Path(run_dir) / 'config.yaml'} --force'"


def check_store_present(run_dir: Path, corpus: Path) -> None:
    """Refuse, naming the run's ``config.yaml`` and how to point it at the store, a run whose
    corpus store is no longer where the run's config says (moved or deleted)."""
    if Path(corpus).exists():
        return
    saved = Path(run_dir) / "config.yaml"
    raise CorpusUsageError(f"{saved}: corpus {corpus}: no corpus store there (moved or "
                           f"deleted); set corpus in {saved} to the store's new place, or "
                           f"prepare it there again with 'topictk prepare INPUT --out {corpus}'")


def load_samples(run_dir: Path, steps: list[int]) -> list[dict]:
    # samples are saved only as training passes their steps: a damaged one needs a new run
    fix = (f"samples are only saved during training; train the run again with "
           f"{retrain_command(run_dir)}")
    samples = []
    for step in steps:
        _, arrays = ckpt.load_arrays(sample_path(run_dir, step), fix)
        samples.append(arrays)
    return samples


MARKER_FILE = RUN_MARKER
RUN_TOP_FILES = (MARKER_FILE, "config.yaml", "metrics.jsonl", MODEL_FILE, SCORES_FILE)
STEP_FILE = re.compile(r"^step-\d+\.npz$")


def run_files(run_dir: Path) -> list[str]:
    """The files of ``run_dir`` that training writes (paths relative to it): the marker,
    ``config.yaml``, ``metrics.jsonl``, ``model.npz``, the scores cache ``scores.json`` (which
    evaluation writes) and ``step-*.npz`` in ``checkpoints/`` and ``samples/``. Anything else
    in the folder is someone else's, and ``train --force`` leaves it where it is."""
    run_dir = Path(run_dir)
    found = [name for name in RUN_TOP_FILES
             if (run_dir / name).is_symlink() or (run_dir / name).is_file()]
    for sub in ("checkpoints", "samples"):
        folder = run_dir / sub
        if folder.is_dir() and not folder.is_symlink():
            found.extend(f"{sub}/{p.name}" for p in sorted(folder.iterdir())
                         if STEP_FILE.match(p.name) and (p.is_file() or p.is_symlink()))
    return found


def _remove_empty_subfolders(run_dir: Path) -> None:
    for sub in ("checkpoints", "samples"):
        try:
            (Path(run_dir) / sub).rmdir()       # only when empty
        except OSError:
            pass


class ReplacedRun:
    """The files of a run that ``train --force`` replaces (:func:`run_files`: those training
    wrote, nothing else), moved into a hidden folder of the run directory until the new run has
    something to show for itself (:meth:`discard`), or put back if it fails before that
    (:meth:`restore`)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.folder = Path(tempfile.mkdtemp(prefix=".replaced-", dir=self.run_dir))
        for name in run_files(self.run_dir):
            (self.folder / name).parent.mkdir(exist_ok=True)
            os.replace(self.run_dir / name, self.folder / name)
        _remove_empty_subfolders(self.run_dir)

    @staticmethod
    def report_left_over(run_dir: Path) -> None:
        """Name the folders an interrupted replacement left behind (a process killed before
        it could put the old run back or remove it); they are never deleted here."""
        for folder in sorted(Path(run_dir).glob(".replaced-*")):
            if folder.is_dir():
                names = ", ".join(sorted(p.name for p in folder.iterdir())) or "empty"
                log.warning("%s: files of a run that an interrupted 'train --force' was "
                            "replacing (%s); move them back into %s to recover that run, or "
                            "delete the folder", folder, names, run_dir)

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def restore(self) -> None:
        for name in run_files(self.run_dir):        # the new run's files
            (self.run_dir / name).unlink(missing_ok=True)
        _remove_empty_subfolders(self.run_dir)
        for name in run_files(self.folder):
            (self.run_dir / name).parent.mkdir(exist_ok=True)
            os.replace(self.folder / name, self.run_dir / name)
        shutil.rmtree(self.folder, ignore_errors=True)
