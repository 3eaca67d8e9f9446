"""One held-out score per run, computed once: the ``topictk evaluate`` protocol on the store's
full held-out set, cached in the run directory's ``scores.json``.

``evaluate``, ``compare``, ``report``, ``plot`` and :meth:`topictk.api.Run.evaluate` all take a
run's score from :func:`run_scores`, so every one of them shows (and ranks by) the same number.
An entry is keyed by everything the number depends on: the model file scored (final model or
checkpoint: its name, size and mtime_ns), the saved samples (the same), the corpus store (its
``corpus_id`` and vocabulary hash), the evaluation protocol (the config's ``evaluation``
settings but the in-training curve's, and the left-to-right particles), the model and inference
settings and topictk's version. Anything else is a miss: training again, resuming or extending
a run rewrites its model, so its old entries no longer match.

The file is written atomically; a run directory that cannot be written (read-only, full) gets
its score computed and shown all the same, every time.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from topictk import __version__
from topictk._fileio import atomic_write_text
from topictk.limits import json_loads
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.layout import MODEL_FILE, SCORES_FILE, STEP_FILE

log = logging.getLogger("topictk")

FORMAT = 1
MAX_ENTRIES = 32            # checkpoints and particle counts scored; the oldest go first
MAX_BYTES = 4 << 20         # a larger scores.json is not ours to read
# the in-training curve's settings: they never change what evaluate scores
CURVE_KEYS = ("curve_docs", "curve_fold_in_sweeps")
# the settings of one fold-in that the other never reads
SAMPLED_KEYS = ("fold_in_sweeps", "fold_in_burn_in", "chunk_docs")
FIXED_POINT_KEYS = ("fold_in_tol", "fold_in_max_iterations")
FIXED_POINT = "fixed-point"


def theta_estimator(config) -> str:
    """The estimator of theta that evaluate scores the runs of ``config`` with: gibbs, mh or
    fixed-point (``evaluation.fold_in``), or the family's own (a variational E-step, deep
    LDA's persistent test chain) when it does not fold in by Gibbs."""
    from topictk.inference.registry import get_driver

    try:
        driver = get_driver(config.inference.algorithm)
    except (KeyError, ValueError, TypeError, AttributeError):
        return str(getattr(config.evaluation, "fold_in", "gibbs"))
    return driver.heldout_estimator(config)


def protocol(config, left_to_right: int | None = None) -> dict:
    """The evaluate protocol of a run's config: the estimator and its settings (what a reader
    must know to compare two runs' scores). ``theta`` names the estimator of theta; only the
    settings of the fold-in used are listed (a gibbs config's protocol is what it was before
    the fixed-point fold-in existed)."""
    ev = {k: v for k, v in config.to_dict()["evaluation"].items() if k not in CURVE_KEYS}
    unused = SAMPLED_KEYS if ev.get("fold_in") == FIXED_POINT else FIXED_POINT_KEYS
    ev = {k: v for k, v in ev.items() if k not in unused}
    return {"estimator": "document completion", "theta": theta_estimator(config), **ev,
            "left_to_right": left_to_right}


def store_counts(corpus) -> dict:
    """The counts of a store's manifest (empty when it cannot be read)."""
    try:
        counts = json_loads((Path(corpus) / "manifest.json").read_bytes())["counts"]
        return dict(counts) if isinstance(counts, dict) else {}
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return {}


def protocol_line(config, left_to_right: int | None = None) -> str:
    """How ``evaluate`` scores the runs of ``config``'s store and settings, in one line."""
    return describe_protocol(protocol(config, left_to_right),
                             store_counts(config.corpus).get("test_documents"))


def describe_protocol(proto: dict, test_documents: int | None = None) -> str:
    """One line for a page or a table: "evaluate: document completion on all 34 test
    documents, gibbs fold-in 50 sweeps (25 burn-in)"."""
    if test_documents == 0:         # Protocol B: the training documents' held-out tokens
        docs = "the training documents' held-out tokens (the store has no test documents)"
    else:
        docs = ("all test documents" if test_documents is None
                else f"all {int(test_documents):,} test documents")
    theta = proto.get("theta") or proto.get("fold_in")
    if theta == FIXED_POINT:
        how = (f"fixed-point fold-in (tol {proto.get('fold_in_tol')}, at most "
               f"{proto.get('fold_in_max_iterations')} updates)")
    elif theta in ("gibbs", "mh"):
        how = (f"{theta} fold-in {proto.get('fold_in_sweeps')} sweeps "
               f"({proto.get('fold_in_burn_in')} burn-in)")
    else:
        how = f"theta by the {theta}"
    text = f"evaluate: document completion on {docs}, {how}"
    if proto.get("left_to_right"):
        text += f", left-to-right with {proto['left_to_right']} particles"
    return text


def _stat(path: Path) -> list | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [int(st.st_size), int(st.st_mtime_ns)]


def _store_identity(corpus: Path) -> dict:
    try:
        manifest = json_loads((Path(corpus) / "manifest.json").read_bytes())
        return {"corpus_id": str(manifest["corpus_id"]),
                "vocab_sha256": str(manifest.get("vocab_sha256"))}
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return {"corpus_id": None, "vocab_sha256": None}


def model_path(run_dir: Path, checkpoint: int | None) -> Path:
    return (Path(run_dir) / MODEL_FILE if checkpoint is None
            else ckpt.checkpoint_path(Path(run_dir) / "checkpoints", checkpoint))


def cache_key(run_dir: Path, config, checkpoint: int | None = None,
              left_to_right: int | None = None) -> dict | None:
    """What a cached score must match, read from the files alone (no model is loaded); None
    when the model file is missing."""
    run_dir = Path(run_dir)
    path = model_path(run_dir, checkpoint)
    stat = _stat(path)
    if stat is None:
        return None
    samples = []
    folder = run_dir / "samples"
    if folder.is_dir():
        samples = [[p.name, *(_stat(p) or [None, None])] for p in sorted(folder.iterdir())
                   if STEP_FILE.match(p.name)]
    data = config.to_dict()
    settings = json.dumps({"model": data.get("model"), "inference": data.get("inference")},
                          sort_keys=True, default=str)
    return {"model": str(path.relative_to(run_dir)), "model_file": stat, "samples": samples,
            **_store_identity(config.corpus), "protocol": _keyed_protocol(config, left_to_right),
            "settings_sha256": hashlib.sha256(settings.encode()).hexdigest(),
            "topictk": __version__}


def _keyed_protocol(config, left_to_right: int | None) -> dict:
    """The protocol as the cache keys on it: without ``theta``, which ``evaluation.fold_in``
    (in the protocol) and the algorithm (in the settings) fix, so the entries cached before it
    was named still match."""
    return {k: v for k, v in protocol(config, left_to_right).items() if k != "theta"}


def _read(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / SCORES_FILE
    try:
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            return []
        data = json_loads(path.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError):
        return []           # unreadable or damaged: scored again, and the file rewritten
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return []
    entries = data.get("entries")
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("key"), dict)
            and isinstance(e.get("result"), dict)] if isinstance(entries, list) else []


def lookup(run_dir: Path, key: dict | None) -> dict | None:
    """The cached entry (``result`` and ``train_seconds``) for ``key``, or None."""
    if key is None:
        return None
    for entry in _read(run_dir):
        if entry["key"] == key:
            return entry
    return None


def store(run_dir: Path, key: dict, entry: dict) -> bool:
    """Add ``entry`` under ``key`` to the run's scores.json (replacing the entries of the same
    model and protocol, which an older model left); False when the folder cannot be written,
    which is never an error: the score is computed again next time."""
    run_dir = Path(run_dir)
    same = (key["model"], json.dumps(key["protocol"], sort_keys=True, default=str))
    kept = [e for e in _read(run_dir)
            if (e["key"].get("model"),
                json.dumps(e["key"].get("protocol"), sort_keys=True, default=str)) != same]
    kept = [*kept, {"key": key, **entry}][-MAX_ENTRIES:]
    text = json.dumps({"format": FORMAT, "entries": kept}, sort_keys=True, allow_nan=False,
                      default=str)
    try:
        atomic_write_text(run_dir / SCORES_FILE, text + "\n")
    except (OSError, ValueError) as exc:
        log.debug("%s: scores not cached (%s); they are computed again next time",
                  run_dir / SCORES_FILE, exc)
        return False
    return True


def run_scores(run_dir: str | Path, config=None, checkpoint: int | None = None,
               left_to_right: int | None = None, threads: int | None = None, *,
               loaded=None, recompute: bool = False) -> dict:
    """The evaluate result of a run (without gensim's coherence measures), from scores.json
    when it holds this model, store and protocol, else computed by
    :func:`topictk.evaluation.run.score_loaded` and cached.

    ``config``: the run's config (read from its config.yaml when None); ``loaded``: the run
    already loaded (a :class:`~topictk.evaluation.run.LoadedRun`), else it is loaded only on a
    miss. The result holds ``train_seconds`` and ``status`` of the model too, and ``cached``
    (whether it came from the file)."""
    from topictk.evaluation import run as run_mod

    run_dir = Path(run_dir)
    if config is None:
        config = loaded.config if loaded is not None else _load_config(run_dir)
    key = cache_key(run_dir, config, checkpoint, left_to_right)
    hit = None if recompute else lookup(run_dir, key)
    if hit is not None:
        result = dict(hit["result"])
        result.update(run=str(run_dir), cached=True, estimator=theta_estimator(config))
        return result
    if loaded is None:
        loaded = run_mod.LoadedRun(run_dir, checkpoint, threads,
                                   getattr(config.evaluation, "fold_in", None))
    result = run_mod.score_loaded(loaded, left_to_right)
    clock = loaded.header.get("clock", {})
    result["train_seconds"] = float(clock.get("train_seconds", 0.0))
    result["status"] = str(loaded.header.get("status", "completed"))
    # the files scored are those the key was read from: a model rewritten meanwhile (a run
    # resumed while it was scored) is not cached under the old key
    if key is not None and key == cache_key(run_dir, config, checkpoint, left_to_right):
        stored = {k: v for k, v in result.items() if k not in ("run", "cached")}
        store(run_dir, key, {"result": stored})
    result["cached"] = False
    return result


def _load_config(run_dir: Path):
    from topictk.inference.registry import load_config

    return load_config(run_dir / "config.yaml")


def progress_bar(total: int, quiet: bool = False, desc: str = "scoring runs"):
    """A bar over the runs to score (:func:`topictk.progress.bar`: on a terminal or in a
    notebook, never in a pipe, with ``-q`` or ``quiet``); the fold-in of each run shows its own
    bar below it."""
    from topictk import progress

    return progress.bar(total, desc=desc, unit="run",
                        show=False if quiet or total == 0 else None)


def scored_already(run_dir: Path, config, left_to_right: int | None = None) -> bool:
    """Whether the final model's score is in the run's scores.json (no scoring needed)."""
    return lookup(run_dir, cache_key(run_dir, config, None, left_to_right)) is not None


__all__ = ["SCORES_FILE", "cache_key", "describe_protocol", "lookup", "progress_bar",
           "protocol", "protocol_line", "run_scores", "scored_already", "store",
           "store_counts", "theta_estimator"]

