"""``metrics.jsonl``: one JSON object per evaluation, appended and flushed as training goes."""
from __future__ import annotations

import json
import os
from pathlib import Path

from topictk._fileio import atomic_write_text
from topictk.limits import json_loads


def append_metrics(path: Path, record: dict) -> None:
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)    # a failed write (disk full) names the log
        raise


def read_metrics(path: Path) -> list[dict]:
    if not Path(path).exists():
        return []
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json_loads(line))
        except json.JSONDecodeError:
            break  # a line cut by a crash ends the log
    return records


def truncate_metrics(path: Path, last_step: int) -> None:
    """Keep only records up to ``last_step`` (used when resuming from a checkpoint)."""
    kept = [r for r in read_metrics(path) if r.get("step", 0) <= last_step]
    atomic_write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))


# the held-out curve "rises" when each of its last RISE_POINTS evaluations is above the best
# evaluation before them by more than RISE_MARGIN (relative): one or two noisy points, or a
# flat curve wobbling around its best, do not count. The in-training curve scores few
# documents with a short fold-in, so a converged run's points scatter by 1-3 % (online VB on
# the example corpus: 353 to 363; Gibbs on 2,000 documents of 20 Newsgroups, 50 curve
# documents: a best of 1889 between 1945 and 1934)
RISE_POINTS = 3
RISE_MARGIN = 0.02
CURVE_KEYS = ("perplexity_point", "perplexity_train_heldout_point")


def curve_rise(records: list[dict]) -> str | None:
    """One line saying that the in-training held-out perplexity of ``records`` (metrics.jsonl)
    rose over its last evaluations, or None when it did not (or has too few points)."""
    for key in CURVE_KEYS:
        points = [(int(r["step"]), float(r[key])) for r in records
                  if isinstance(r.get(key), (int, float)) and "step" in r]
        if points:
            break
    else:
        return None
    if len(points) <= RISE_POINTS:
        return None
    earlier, last = points[:-RISE_POINTS], points[-RISE_POINTS:]
    best_step, best = min(earlier, key=lambda point: point[1])
    if not all(value > best * (1 + RISE_MARGIN) for _, value in last):
        return None
    shown = ", ".join(f"{value:.1f} at step {step}" for step, value in last)
    return (f"the held-out perplexity rose over the last {RISE_POINTS} evaluations ({shown}) "
            f"above its best, {best:.1f} at step {best_step} (overfitting, or steps too "
            f"large): fewer inference.iterations or a smaller step size may score better")
