"""The files of a run directory, and the checks that a saved model belongs to a config.

A run directory holds ``config.yaml``, ``metrics.jsonl``, ``checkpoints/step-*.npz``,
``samples/step-*.npz`` (the SG-MCMC and Gibbs samples scoring averages over) and ``model.npz``.
Training writes them; evaluation, inference and the topic listings read them.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from topictk.errors import CorpusUsageError, UsageError
from topictk.rundir import checkpoint as ckpt

if TYPE_CHECKING:
    from topictk.config.loader import Config
    from topictk.corpus.store import CorpusStore

log = logging.getLogger("topictk")

MODEL_FILE = "model.npz"


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


def load_samples(run_dir: Path, steps: list[int]) -> list[dict]:
    # samples are saved only as training passes their steps: a damaged one needs a new run
    fix = (f"samples are only saved during training; train the run again with "
           f"{retrain_command(run_dir)}")
    samples = []
    for step in steps:
        _, arrays = ckpt.load_arrays(sample_path(run_dir, step), fix)
        samples.append(arrays)
    return samples


RUN_FILES = ("checkpoints", "samples", "metrics.jsonl", MODEL_FILE, "config.yaml")


class ReplacedRun:
    """The files of a run that ``train --force`` replaces, moved into a hidden folder of the
    run directory until the new run has something to show for itself (:meth:`discard`), or put
    back if it fails before that (:meth:`restore`)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.folder = Path(tempfile.mkdtemp(prefix=".replaced-", dir=self.run_dir))
        for name in RUN_FILES:
            if (self.run_dir / name).exists():
                os.replace(self.run_dir / name, self.folder / name)

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
        for name in RUN_FILES:
            new = self.run_dir / name
            if new.is_dir():
                shutil.rmtree(new, ignore_errors=True)
            else:
                new.unlink(missing_ok=True)
            if (self.folder / name).exists():
                os.replace(self.folder / name, new)
        shutil.rmtree(self.folder, ignore_errors=True)
