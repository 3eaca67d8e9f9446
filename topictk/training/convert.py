"""``topictk convert RUN --to lda --out NEWRUN``: a fixed-K LDA run whose chain starts where a
hierarchical Dirichlet process run (``model.family: hdp``) is, on its live topics (docs/train.md,
"Converting an HDP run to LDA").

NEWRUN is made as ``train --continue`` makes a continued run (:mod:`topictk.training.grow`: a
hidden folder beside it, put in its place whole, then trained by resuming it), on RUN's own
corpus store:

* ``config.yaml``: RUN's config with an LDA model section: ``topics`` = live K, ``beta`` =
  RUN's, ``alpha`` = ``--set model.alpha`` (default LDA's); ``inference.iterations`` = RUN's
  step + the steps to add (``--set inference.iterations=N``, default RUN's iterations);
* ``checkpoints/step-S.npz`` at RUN's step S: RUN's latest state with the live topics kept,
  largest first (tokens n_k descending, ties by slot): the token of slot ``live[j]`` gets topic
  j, every count follows, with RUN's random streams and clock;
* the run marker, which records ``converted_from``: RUN, its step, and ``topics``, the HDP
  topic number (slot + 1) of each LDA topic, so that labels carry over.

RUN is only read.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from topictk._fileio import atomic_write_text
from topictk.config.loader import parse_override
from topictk.corpus.store import CorpusStore
from topictk.errors import UsageError
from topictk.inference.registry import driver_class, load_config
from topictk.numbering import topic_number
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.guard import write_marker
from topictk.rundir.layout import MARKER_FILE, check_store_present
from topictk.streams import Streams
from topictk.training.grow import (_additional_steps, _check_output, latest_state,
                                   trained_run_config, write_and_train)
from topictk.training.run import RESUMABLE_CHANGES, TrainResult, _header, saved_config_text

#: the targets of ``convert --to``
TARGETS = ("lda",)
#: the LDA model keys ``convert --set`` may give (besides what a resumed run may change)
MODEL_KEYS = ("model.alpha",)


def live_topics(nk: np.ndarray) -> np.ndarray:
    """The slots holding tokens, largest first (n_k descending, ties by ascending slot): the
    order of the LDA topics a converted run has, and the order HDP runs list their topics."""
    nk = np.asarray(nk)
    live = np.flatnonzero(nk)
    return live[np.argsort(-nk[live], kind="stable")]


def convert_run(run: str, out: str | None, to: str = "lda", overrides: list[str] = (), *,
                force: bool = False, quiet: bool = False,
                extra_files: Callable[[np.ndarray, int], dict[str, str]] | None = None,
                ours: Callable[[Path], bool] | None = None) -> TrainResult:
    """Write NEWRUN ``out``, RUN ``run`` (an HDP run) converted to ``to``, and train it.
    ``extra_files`` is given the kept slots (0-based, in the new topics' order) and RUN's
    K_max, and returns more files of NEWRUN (name -> text: the carried-over labels); ``ours``
    says which other files of an existing NEWRUN topictk wrote (its labels file), which
    ``force`` replaces with the run."""
    if to not in TARGETS:
        raise UsageError(f"--to {to}: convert makes {', '.join(TARGETS)} runs only")
    if not out:
        raise UsageError("convert writes a new run: give it with --out NEWRUN (RUN is never "
                         "changed)")
    run_dir, out_dir = Path(run), Path(out).resolve()
    model = _model_overrides(overrides)
    others = [o for o in overrides if parse_override(o)[0] != ["model", "alpha"]]
    extra = _additional_steps(others)
    others = [o for o in others if parse_override(o)[0] != ["inference", "iterations"]]
    old_config = trained_run_config(run_dir, f"convert {run}")
    family = getattr(old_config.model, "family", "lda")
    if family != "hdp":
        raise UsageError(f"convert {run}: a run of model.family {family}; convert --to lda "
                         f"takes a run of model.family hdp (a fixed-K run needs no "
                         f"conversion: go on with 'topictk train --resume')")
    check_store_present(run_dir, old_config.corpus)
    _check_output(out_dir, force, [run_dir.resolve(), Path(old_config.corpus).resolve()], out,
                  ours)
    store = CorpusStore.open(old_config.corpus)
    path, header, arrays = latest_state(run_dir, old_config, store)
    origin = {"run": str(run_dir.resolve()), "state": path.name, "to": to}

    def write(tmp: Path) -> None:
        live = _write_run(tmp, old_config, store, (header, arrays), origin, extra,
                          [*others, *model])
        more = extra_files(live, int(old_config.model.topics)) if extra_files else {}
        for name, text in more.items():
            atomic_write_text(tmp / name, text)

    return write_and_train(out_dir, "convert", write, quiet)


def _model_overrides(overrides: list[str]) -> list[str]:
    """The ``model.*`` overrides (model.alpha only: the LDA run's other model keys are RUN's
    live K and beta)."""
    found = []
    for text in overrides:
        parts, _ = parse_override(text)
        key = ".".join(parts)
        if key in MODEL_KEYS:
            found.append(text)
        elif key not in RESUMABLE_CHANGES:
            raise UsageError(f"--set {text}: a converted run keeps RUN's settings, with K = "
                             f"its live topics and its beta; only "
                             f"{', '.join(sorted({*MODEL_KEYS, *RESUMABLE_CHANGES}))} may be "
                             f"set")
    return found


def _write_run(folder: Path, old_config, store: CorpusStore, saved: tuple, origin: dict,
               extra: int | None, overrides: list[str]) -> np.ndarray:
    """The converted run in ``folder``: config, marker and first checkpoint; returns the kept
    slots in the new topics' order."""
    header, arrays = saved
    streams = Streams.from_state(header["streams"])
    old_driver = driver_class(old_config)(old_config, store, int(old_config.training.threads),
                                          streams=streams)
    old = old_driver.state_from_arrays(header["state"], arrays)
    step = int(header["state"]["step"])
    live = live_topics(old.nk)
    data = old_config.to_dict()
    data.update(output=str(folder))
    data["model"] = {"family": "lda", "topics": int(live.size),
                     "beta": float(old_config.model.beta)}
    iterations = step + (extra if extra is not None else int(old_config.inference.iterations))
    config = load_config(None, [*overrides, f"inference.iterations={iterations}"], raw=data)
    driver = driver_class(config)(config, store, int(config.training.threads), streams=streams)
    new_topic = np.full(old.nk.size, -1, dtype=np.int64)
    new_topic[live] = np.arange(live.size)
    z = new_topic[np.asarray(old.z)].astype(np.int32)
    state = driver.new_state(z, *_counts(z, driver.doc_ptr, driver.words, driver.V, live.size))
    if config.model.alpha == "auto":
        # alpha is learnt from here on: it starts at the HDP's document prior alpha_0 pi
        state.alpha = np.asarray(old.alpha, dtype=np.float64)[live].copy()
    state.step, state.sample_steps = step, []
    new_header, new_arrays = _header(driver, store, config, state, streams,
                                     dict(header["clock"]), "running")
    marker = write_marker(folder, store, None)
    marker["converted_from"] = {**origin, "step": step, "family": "hdp",
                                "topics": [topic_number(k) for k in live]}
    atomic_write_text(folder / MARKER_FILE, json.dumps(marker, indent=1) + "\n")
    atomic_write_text(folder / "config.yaml", saved_config_text(config))
    ckpt.save_arrays(ckpt.checkpoint_path(folder / "checkpoints", step), new_header,
                     new_arrays)
    return live


def _counts(z: np.ndarray, doc_ptr: np.ndarray, words: np.ndarray, n_words: int,
            n_topics: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n_dk, n_kw, n_k) of the topics ``z`` (counted from z, whatever counts the HDP run's
    sampler kept)."""
    n_docs = doc_ptr.size - 1
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(doc_ptr))
    ndk = np.bincount(doc_of * n_topics + z, minlength=n_docs * n_topics)
    nkw = np.bincount(np.asarray(words, dtype=np.int64) * n_topics + z,
                      minlength=n_words * n_topics)
    return (ndk.reshape(n_docs, n_topics).astype(np.int32),
            nkw.reshape(n_words, n_topics).astype(np.int32),
            np.bincount(z, minlength=n_topics).astype(np.int64))
