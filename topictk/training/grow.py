"""``topictk train --continue RUN --add STORE --out NEWRUN``: a new run that continues a
trained run's chain on its documents and new ones (docs/train.md, "Adding documents to a
trained model").

NEWRUN is made whole in a hidden folder beside it and then put in its place, so that a failure
leaves no half-made run (and a run replaced with ``--force`` intact):

* ``corpus/``: the union store (:mod:`topictk.corpus.union`), which the run's ``config.yaml``
  names relatively (``corpus: corpus``), so the run can be moved;
* ``config.yaml``: RUN's config with ``inference.iterations`` = RUN's step + the steps to add;
* ``checkpoints/step-S.npz`` at RUN's step S: RUN's latest state grown by its driver's
  :meth:`~topictk.inference.base.Driver.grow_state`, with RUN's random streams and clock;
* the run marker, which records where the run came from (``continued_from``: RUN, its step,
  STORE, the two stores' corpus ids, and the words new to RUN's vocabulary: how many, their
  tokens, and whether they were added with the prior or, for a run whose topics have no
  prior (:meth:`~topictk.inference.base.Driver.takes_new_words`), dropped with their tokens).

Training then resumes NEWRUN from that checkpoint like any run, so a continued run resumes,
evaluates and is listed as any other. RUN and both stores are only read.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from topictk._fileio import atomic_write_text, is_temp_name, new_dir_mode
from topictk.config.loader import parse_override
from topictk.corpus.store import CorpusStore, is_store_folder
from topictk.corpus.union import UnionFacts, write_union_store
from topictk.errors import CheckpointUsageError, UsageError
from topictk.inference.base import AddedDocuments, cannot_add_documents
from topictk.inference.registry import driver_class, load_config
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.guard import (is_empty_for_run, is_run, protected_folder, read_marker,
                                  write_marker)
from topictk.rundir.layout import (MARKER_FILE, MODEL_FILE, check_compatible,
                                   check_store_present, run_files)
from topictk.rundir.lock import LOCK_FILE
from topictk.streams import Streams
from topictk.training.run import RESUMABLE_CHANGES, TrainResult, _header
from topictk.training.run import train as run_training

log = logging.getLogger("topictk")

#: the folder of a continued run that holds its union store
CORPUS_FOLDER = "corpus"


def continue_run(run: str, added: str, out: str | None, overrides: list[str] = (), *,
                 force: bool = False, resume: bool = False, quiet: bool = False) -> TrainResult:
    """Train NEWRUN ``out``: RUN ``run`` continued with the training documents of the store
    ``added``. ``overrides`` may change only what a resumed run may change; there
    ``inference.iterations=N`` counts the steps to train beyond RUN's step (default: as many
    as RUN's config trains). ``resume`` continues a continued run that was stopped."""
    if not out:
        raise UsageError("--continue RUN --add STORE writes a new run: give it with --out "
                         "NEWRUN (RUN is never changed)")
    run_dir, out_dir = Path(run), Path(out).resolve()
    extra = _additional_steps(overrides)
    others = [o for o in overrides if parse_override(o)[0] != ["inference", "iterations"]]
    if resume:
        return _resume(out_dir, extra, others, quiet)
    old_config = trained_run_config(run_dir, f"--continue {run}")
    check_store_present(run_dir, old_config.corpus)
    added_store = CorpusStore.open(added)
    _check_output(out_dir, force, [run_dir.resolve(), Path(old_config.corpus).resolve(),
                                   Path(added).resolve()], out)
    cls = driver_class(old_config)
    family = getattr(old_config.model, "family", "lda")
    if family not in cls.traits.add_documents:
        raise cannot_add_documents(cls.name, family)
    base = CorpusStore.open(old_config.corpus)
    path, header, arrays = latest_state(run_dir, old_config, base)
    origin = {"run": str(run_dir.resolve()), "state": path.name,
              "added": str(Path(added).resolve())}
    return write_and_train(out_dir, "continue", lambda tmp: _write_run(
        tmp, old_config, base, added_store, (header, arrays), origin, extra, others), quiet)


def trained_run_config(run_dir: Path, named: str):
    """The config of the trained run in ``run_dir``, its output where the run is now; refuses
    a folder that is no run (``named``: the option and value, for the message)."""
    if not is_run(run_dir) or not (run_dir / "config.yaml").is_file():
        raise UsageError(f"{named}: not a run directory (no {MARKER_FILE} and "
                         f"config.yaml); give the output directory of a trained run")
    return load_config(run_dir / "config.yaml", [f"output={run_dir.resolve()}"])


def latest_state(run_dir: Path, config, store: CorpusStore) -> tuple[Path, dict, dict]:
    """The newest saved state of the run in ``run_dir`` (path, header, arrays), checked
    against its ``config`` and ``store``."""
    path, header, arrays = _latest_state(run_dir)
    check_compatible(header, config, store, path)
    return path, header, arrays


def write_and_train(out_dir: Path, kind: str, write: Callable[[Path], None],
                    quiet: bool) -> TrainResult:
    """A new run made whole by ``write(folder)`` in a hidden folder beside ``out_dir``
    (``.NAME.KIND-*``), put in its place (a failure leaves nothing half made), then trained by
    resuming it from the checkpoint ``write`` saved."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.{kind}-", dir=out_dir.parent))
    try:
        os.chmod(tmp, new_dir_mode())       # mkdtemp alone leaves 0700
        write(tmp)
        _put_in_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return run_training(load_config(out_dir / "config.yaml", [f"output={out_dir}"]),
                        resume=True, quiet=quiet)


def _write_run(folder: Path, old_config, base: CorpusStore, added: CorpusStore, saved: tuple,
               origin: dict, extra: int | None, overrides: list[str]) -> None:
    """The continued run in ``folder``: its union store, config, marker (with ``origin`` and
    the corpus ids) and first checkpoint, the state ``saved`` (header, arrays) of the run
    configured by ``old_config`` on ``base`` grown by its driver."""
    header, arrays = saved
    cls = driver_class(old_config)
    old_driver = cls(old_config, base, int(old_config.training.threads),
                     streams=Streams.from_state(header["streams"]))
    old_state = old_driver.state_from_arrays(header["state"], arrays)
    step = int(header["state"]["step"])
    manifest = write_union_store(base, added, folder / CORPUS_FOLDER,
                                 new_words=cls.takes_new_words(old_config))
    union = CorpusStore.open(folder / CORPUS_FOLDER)
    data = old_config.to_dict()
    data.update(corpus=str(folder / CORPUS_FOLDER), output=str(folder))
    iterations = step + (extra if extra is not None else int(old_config.inference.iterations))
    kept = [f"{key}={value}" for key, value in old_driver.continued_settings(old_state).items()]
    config = load_config(None, [*overrides, *kept, f"inference.iterations={iterations}"],
                         raw=data)
    streams = Streams.from_state(header["streams"])
    driver = cls(config, union, int(config.training.threads), streams=streams)
    facts = UnionFacts.of_manifest(manifest)
    state = driver.grow_state(old_state, AddedDocuments(
        facts.base_documents, facts.base_tokens, facts.base_words, streams))
    state.sample_steps = []
    new_header, new_arrays = _header(driver, union, config, state, streams,
                                     dict(header["clock"]), "running")
    marker = write_marker(folder, union, None)
    marker["continued_from"] = {**origin, "step": step, "run_corpus_id": base.corpus_id,
                                "added_corpus_id": added.corpus_id,
                                "corpus_id": union.corpus_id, "steps_added": iterations - step,
                                "new_words": {"words": facts.new_words,
                                              "tokens": facts.new_word_tokens,
                                              "dropped": facts.new_words_dropped}}
    atomic_write_text(folder / MARKER_FILE, json.dumps(marker, indent=1) + "\n")
    saved_config = config.to_dict()
    saved_config.update(corpus=CORPUS_FOLDER, output=".")
    atomic_write_text(folder / "config.yaml", yaml.safe_dump(saved_config, sort_keys=False))
    ckpt.save_arrays(ckpt.checkpoint_path(folder / "checkpoints", step), new_header,
                     new_arrays)
    _report_growth(facts, driver.name)


def check_continue_options(run: str | None, added: str | None, config: str | None,
                           sweeps, scheduler, dask_workers) -> None:
    """Refuse, in one line, options that do not go with ``--continue RUN --add STORE``."""
    if not run or not added:
        given, missing = ("--continue", "--add STORE") if run else ("--add", "--continue RUN")
        raise UsageError(f"{given} needs {missing}: 'topictk train --continue RUN --add STORE "
                         f"--out NEWRUN'")
    for option, value in (("--config", config), ("--sweep", sweeps),
                          ("--scheduler", scheduler), ("--dask-workers", dask_workers)):
        if value:
            raise UsageError(f"{option} does not go with --continue: a continued run takes "
                             f"RUN's config; leave out {option}")


def _additional_steps(overrides: list[str]) -> int | None:
    """The steps to train beyond RUN's (``inference.iterations`` of ``overrides``), after
    refusing any override a resumed run may not change either."""
    extra = None
    for text in overrides:
        parts, value = parse_override(text)
        key = ".".join(parts)
        if key not in RESUMABLE_CHANGES:
            raise UsageError(f"--set {text}: a continued run keeps RUN's settings (its chain "
                             f"goes on); only {', '.join(sorted(RESUMABLE_CHANGES))} may be "
                             f"set")
        if key == "inference.iterations":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"--set {text}: inference.iterations counts the steps to "
                                 f"add beyond RUN's and must be an integer >= 1")
            extra = value
    return extra


def _resume(out_dir: Path, extra: int | None, others: list[str], quiet: bool) -> TrainResult:
    """``--resume``: continue the continued run in ``out_dir`` from its last checkpoint
    (``inference.iterations=N``: N steps beyond the step of the run it continued)."""
    marker = read_marker(out_dir) if (out_dir / "config.yaml").is_file() else None
    origin = (marker or {}).get("continued_from")
    if origin is None:
        raise UsageError(f"{out_dir}: holds no run continued with --continue --add; leave out "
                         f"--resume to make one")
    overrides = [f"output={out_dir}", *others]
    if extra is not None:
        overrides.append(f"inference.iterations={int(origin['step']) + extra}")
    return run_training(load_config(out_dir / "config.yaml", overrides), resume=True,
                        quiet=quiet)


def _latest_state(run_dir: Path) -> tuple[Path, dict, dict]:
    """The latest of the run's final model and its checkpoints (by step)."""
    found = [path for _, path in ckpt.list_checkpoints(run_dir / "checkpoints")[-1:]]
    if (run_dir / MODEL_FILE).is_file():
        found.append(run_dir / MODEL_FILE)
    if not found:
        raise CheckpointUsageError(f"{run_dir}: has neither {MODEL_FILE} nor a checkpoint to "
                                   f"continue; train it first")
    loaded = [(path, *ckpt.load_arrays(path, f"train {run_dir} again")) for path in found]
    return max(loaded, key=lambda item: int(item[1]["state"]["step"]))


def _check_output(out_dir: Path, force: bool, inputs: list[Path], shown: str,
                  ours: Callable[[Path], bool] | None = None) -> None:
    """NEWRUN must be none of the inputs, neither inside one nor holding one; an existing
    NEWRUN is replaced only with ``force``, and only when it is a run or empty, holding
    nothing training did not write (or ``ours`` says topictk wrote: a labels file). ``shown``:
    NEWRUN as typed, for the messages."""
    for source in inputs:
        if out_dir == source or source in out_dir.parents or out_dir in source.parents:
            raise UsageError(f"--out {shown}: is, holds or is inside the input {source}, "
                             f"which a continued run never changes; choose another --out")
    if not out_dir.exists():
        return
    if not force:
        raise UsageError(f"--out {shown}: exists; add --force to replace it, or choose "
                         f"another --out")
    reason = protected_folder(out_dir)
    if reason:
        raise UsageError(f"--out {shown}: {reason}; --force never replaces it")
    if not out_dir.is_dir() or not (is_run(out_dir) or is_empty_for_run(out_dir)):
        raise UsageError(f"--out {shown}: holds files that are not a topictk run; choose "
                         f"another --out (--force replaces runs only)")
    foreign = _foreign_file(out_dir, ours)
    if foreign is not None:
        raise UsageError(f"--out {shown}: holds {foreign}, which topictk did not write and "
                         f"--force replaces the folder whole; move it out or choose another "
                         f"--out")


def _foreign_file(out_dir: Path, ours: Callable[[Path], bool] | None = None) -> str | None:
    """The first file of the run ``out_dir`` that training did not write (its files, its
    union store, topictk's leftovers) and ``ours`` does not say topictk wrote, or None."""
    written = set(run_files(out_dir))
    for path in sorted(out_dir.rglob("*")):
        name = path.relative_to(out_dir).as_posix()
        top = name.split("/")[0]
        if (path.is_dir() and not path.is_symlink()) or name in written or is_temp_name(
                path.name) or top == LOCK_FILE or top.startswith(".replaced-"):
            continue
        if top == CORPUS_FOLDER and is_store_folder(out_dir / CORPUS_FOLDER):
            continue
        if ours is not None and ours(path):
            continue
        return name
    return None


def _put_in_place(new: Path, out_dir: Path) -> None:
    """Rename the finished run ``new`` to ``out_dir``, the run there (if any) moved aside
    first and deleted once the new one is in place."""
    if not out_dir.exists():
        os.replace(new, out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.replaced-", dir=out_dir.parent))
    os.replace(out_dir, old / "run")
    try:
        os.replace(new, out_dir)
    except BaseException:
        os.replace(old / "run", out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _report_growth(facts: UnionFacts, algorithm: str) -> None:
    if facts.new_words_dropped:
        fate = ("dropped from the added documents (its topics are a point estimate with no "
                "prior to give a new word)")
    else:
        fate = "added with the prior"
    log.info("continuing on %d + %d training documents (%d + %d tokens); %d new words with "
             "%d tokens %s (%s)", facts.base_documents, facts.added_documents,
             facts.base_tokens, facts.added_tokens, facts.new_words, facts.new_word_tokens,
             fate, algorithm)
