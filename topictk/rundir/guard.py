"""What a run directory is, what ``train`` may write over, and where ``--out FILE`` may go.

A run directory is recognised, never guessed: ``train`` writes a marker (``topictk-run.json``:
format version, run id, creation time, the corpus it was trained on) before anything else when
a run starts. A run written by a release before the marker is recognised only when every file
in it is one training writes and its model or a checkpoint opens as topictk's; any other
folder is someone else's. ``train --force`` replaces a folder only when it is a run or empty
(nothing in it but topictk's own lock file and leftovers), and then only the files training
writes (:func:`topictk.rundir.layout.run_files`); it never replaces the root folder, the home
folder, the working directory (or a folder above it) or a folder holding one of the command's
inputs. A file written with ``--out FILE`` is never an input, never inside a run or a corpus
store, never anything but a regular file, and replaces an existing file only with ``--force``.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import stat
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from topictk._fileio import atomic_write_text, is_temp_name, remove_stale_temps
from topictk.errors import CheckpointError, CorpusUsageError, UsageError
from topictk.markers import RUN_FORMAT, has_run_marker, has_store_manifest
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.layout import (MARKER_FILE, MODEL_FILE, RUN_TOP_FILES, STEP_FILE,
                                   ReplacedRun)
from topictk.rundir.lock import LOCK_FILE

if TYPE_CHECKING:
    from topictk.config.loader import Config
    from topictk.corpus.store import CorpusStore

log = logging.getLogger("topictk")

MARKER_FORMAT = RUN_FORMAT
MARKER_VERSION = 1


# ----------------------------------------------------------------------------- recognising
def is_run(path: Path) -> bool:
    """A folder holding a run: topictk's marker, or a run of an earlier release
    (:func:`is_legacy_run`)."""
    path = Path(path)
    return has_run_marker(path) or is_legacy_run(path)


def is_legacy_run(path: Path) -> bool:
    """A run written before the marker existed: ``config.yaml``, nothing but the files
    training writes (and topictk's own leftovers), and a model or checkpoint that opens as
    topictk's. A machine-learning project's ``config.yaml`` beside its own ``checkpoints/``
    is not one."""
    path = Path(path)
    if not (path / "config.yaml").is_file() or (path / MARKER_FILE).exists():
        return False
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name in ("checkpoints", "samples"):
                    if entry.is_symlink() or not entry.is_dir():
                        return False
                    with os.scandir(entry.path) as inner:
                        if not all(STEP_FILE.match(p.name) or _own_leftover(p.name)
                                   for p in inner):
                            return False
                elif entry.name not in RUN_TOP_FILES and not _own_leftover(entry.name):
                    return False
    except OSError:
        return False
    saved = [path / MODEL_FILE] + [p for _, p in
                                   reversed(ckpt.list_checkpoints(path / "checkpoints"))]
    return any(p.is_file() and ckpt.read_header(p) is not None for p in saved)


def is_topictk_store(path: Path) -> bool:
    """A folder whose manifest.json says it is a topictk corpus store (the test for "inside a
    store": other projects keep files named manifest.json too)."""
    return has_store_manifest(path)


def enclosing_run(path: Path) -> Path | None:
    """The run ``path`` is in: a folder above it with the marker, or (runs of an earlier
    release, recognised by their files) its own folder or the one above (``checkpoints/``)."""
    target = _resolved(path)
    for depth, folder in enumerate((target, *target.parents)):
        if has_run_marker(folder) or (depth < 2 and is_legacy_run(folder)):
            return folder
    return None


def _own_leftover(name: str) -> bool:
    """topictk's own files that do not make a folder a run: the lock, the folders of an
    interrupted replacement (never deleted here) and temporary files of killed writes."""
    return name == LOCK_FILE or name.startswith(".replaced-") or is_temp_name(name)


def is_empty_for_run(path: Path) -> bool:
    return all(_own_leftover(p.name) for p in Path(path).iterdir())


def _resolved(path: Path) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(path))


def _within(inner: Path, outer: Path) -> bool:
    """Whether ``inner`` is ``outer`` or below it (both resolved)."""
    return inner == outer or outer in inner.parents


def protected_folder(path: Path) -> str | None:
    """Why ``path`` may never be replaced, or None: the root folder, the home folder, the
    working directory or a folder above it."""
    target = _resolved(path)
    if target == target.parent:
        return "is the root folder"
    try:
        if target == Path.home().resolve():
            return "is your home folder"
    except (RuntimeError, OSError, KeyError):
        pass
    if _within(_resolved(Path.cwd()), target):
        return "is the working directory or contains it"
    return None


def enclosing(path: Path, test) -> Path | None:
    """``path`` or its nearest parent for which ``test`` holds, or None."""
    target = _resolved(path)
    for folder in (target, *target.parents):
        if folder.is_dir() and test(folder):
            return folder
    return None


def check_store_output(out: str | Path) -> None:
    """Refuse a store folder inside a run directory or inside another store: training writes
    and replaces the run's files, and a store's files are its own."""
    target = Path(out)
    run = enclosing_run(target)
    if run is not None:
        raise UsageError(f"{target}: is inside the run directory {run}, whose files training "
                         f"writes and replaces; choose an --out outside it")
    store = enclosing(target.parent, is_topictk_store) if target.parent != target else None
    if store is not None:
        raise UsageError(f"{target}: is inside the corpus store {store}; choose an --out "
                         f"outside it")


# ----------------------------------------------------------------------------- run marker
def write_marker(run_dir: Path, store: CorpusStore, config_file: Path | None = None) -> dict:
    """Mark ``run_dir`` as a run trained on ``store`` (its corpus id and vocabulary hash),
    started from ``config_file`` (None: standard input), before any other file of the run."""
    marker = {"format": MARKER_FORMAT, "format_version": MARKER_VERSION,
              "run_id": uuid.uuid4().hex,
              "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "corpus_id": store.corpus_id,
              "vocab_sha256": store.manifest.get("vocab_sha256"),
              "config_file": None if config_file is None else str(config_file)}
    atomic_write_text(Path(run_dir) / MARKER_FILE, json.dumps(marker, indent=1) + "\n")
    return marker


def read_marker(run_dir: Path) -> dict | None:
    """The run's marker, or None for a run of an earlier release (which has none)."""
    path = Path(run_dir) / MARKER_FILE
    if not path.exists():
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: run marker cannot be read ({type(exc).__name__}); "
                              f"train the run again into a new output") from None
    if not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT:
        raise CheckpointError(f"{path}: not a topictk run marker; train the run again into a "
                              f"new output")
    if marker.get("format_version") != MARKER_VERSION:
        raise CheckpointError(f"{path}: run format version {marker.get('format_version')} is "
                              f"not {MARKER_VERSION}; use the version of topictk that wrote it")
    return marker


def check_run_store(run_dir: Path, store: CorpusStore) -> None:
    """Refuse a store whose vocabulary is not the one the run was trained on, even when its
    manifest claims the corpus id the run was trained on. Another corpus id is refused by the
    checkpoint's own check (which names the checkpoint), as for runs of an earlier release,
    which have no marker."""
    marker = read_marker(run_dir)
    recorded = marker.get("vocab_sha256") if marker else None
    if (recorded is not None and marker.get("corpus_id") == store.corpus_id
            and recorded != store.manifest.get("vocab_sha256")):
        raise CorpusUsageError(f"{store.path}: its vocabulary is not the one the run in "
                               f"{run_dir} was trained on (vocab_sha256 differs from "
                               f"{MARKER_FILE}); point corpus at the store it was trained on")


# ----------------------------------------------------------------------------- train
def check_run_output(run_dir: Path, *, resume: bool, force: bool, inputs: list[Path],
                     locked: bool = True) -> bool:
    """Whether ``train`` may write a run into ``run_dir``; returns True when an existing run
    is to be replaced (``force``). ``inputs``: the store and the config file. Before the run's
    lock is taken (``locked`` False) a folder holding a run is not refused yet: a run being
    written is reported by its lock, naming its writer."""
    run_dir = Path(run_dir)
    store = enclosing(run_dir, is_topictk_store)
    if store is not None:
        raise UsageError(f"{run_dir}: is inside the corpus store {store}; write runs outside "
                         f"corpus stores")
    if not run_dir.exists():
        return False
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: exists and is not a folder; choose another output")
    if resume or is_empty_for_run(run_dir):
        return False
    run = is_run(run_dir)
    if force:
        reason = protected_folder(run_dir)
        if reason:
            raise UsageError(f"{run_dir}: {reason}; --force never replaces it: choose another "
                             f"output")
        target = _resolved(run_dir)
        own_config = target / "config.yaml"
        for source in inputs:
            path = _resolved(source)
            if _within(path, target) and path != own_config:
                raise UsageError(f"{run_dir}: holds the input {source}; --force never replaces "
                                 f"a folder holding an input: choose another output")
    if not run:
        raise UsageError(f"{run_dir}: holds files that are not a topictk run; choose another "
                         f"output, or empty the folder yourself (--force replaces runs only)")
    if force or not locked:
        return True
    if not ((run_dir / MODEL_FILE).exists() or any((run_dir / "checkpoints").glob("step-*.npz"))):
        raise UsageError(f"{run_dir}: holds a run that stopped before its first checkpoint; "
                         f"add --resume to start it again from step 0, --force to replace it, "
                         f"or choose another output")
    raise UsageError(f"{run_dir}: output directory already holds a run; add --resume to "
                     f"continue it, --force to replace it, or choose another output")


def run_inputs(config: Config) -> list[Path]:
    return [Path(config.corpus)] + ([Path(config.source)] if config.source else [])


def prepare_run_dir(run_dir: Path, config: Config, store: CorpusStore, *, resume: bool,
                    force: bool) -> bool:
    """What ``train`` checks and cleans in its run directory, with the run's lock held: refuse
    an output it may not write, check a resumed run's store, and remove temporary files of
    killed writes. Returns True when the run there is to be replaced."""
    run_dir = Path(run_dir)
    if run_dir.is_dir():
        ReplacedRun.report_left_over(run_dir)
    replace = check_run_output(run_dir, resume=resume, force=force, inputs=run_inputs(config))
    if resume and run_dir.is_dir():
        check_run_store(run_dir, store)
    for folder in (run_dir, run_dir / "checkpoints", run_dir / "samples"):
        if folder.is_dir():
            remove_stale_temps(folder, min_age=0.0)     # every writer holds the run's lock
    return replace


# ----------------------------------------------------------------------------- --out FILE
def check_output_file(path: str | None, *, force: bool, inputs: list[str | Path]) -> Path | None:
    """The ``--out FILE`` of a command, checked before any work: a regular file or a new name
    in an existing folder, not one of ``inputs`` (files or folders the command reads), not
    inside a run or a corpus store, and an existing file only with ``force``."""
    if path is None:
        return None
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{out}: is a folder; --out takes a file name")
    if not out.parent.exists():
        raise UsageError(f"{out.parent}: folder not found; create it or choose another --out")
    try:
        info = out.lstat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise UsageError(f"{out}: cannot be examined ({exc.strerror or exc}); choose another "
                         f"--out") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise UsageError(f"{out}: is {kind}; --out writes regular files only: leave out --out "
                         f"to write to standard output and redirect it")
    target = _resolved(out)
    for source in inputs:
        if str(source) == "-":
            continue
        where = _resolved(Path(source))
        if target == where or (where.is_dir() and where in target.parents):
            raise UsageError(f"{out}: is {'an input' if target == where else 'inside the input'} "
                             f"{source}; choose another --out")
    for folder, kind in ((enclosing_run(target.parent), "run"),
                         (enclosing(target.parent, is_topictk_store), "corpus store")):
        if folder is not None:
            raise UsageError(f"{out}: is inside the {kind} {folder}; --out never writes into "
                             f"a {kind}: choose another --out")
    if info is not None and not force:
        raise UsageError(f"{out}: exists; add --force to replace it, or choose another --out")
    return out
