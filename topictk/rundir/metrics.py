"""``metrics.jsonl``: one JSON object per evaluation, appended and flushed as training goes."""
from __future__ import annotations

import itertools
import json
import math
import os
import statistics
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


# the held-out curve "rises" when the mean of its last RISE_WINDOW evaluations is above the
# lowest mean of RISE_WINDOW consecutive evaluations before them by more than the margin: the
# larger of RISE_MARGIN and twice the curve's own scatter (the median relative change from one
# evaluation to the next). Means of three, not single points, because one low point is often
# noise; a margin that grows with the scatter, because a sampler's curve scores one sample and
# scatters by 2-5 % (sgrld on 2,000 documents of 20 Newsgroups: 1827 to 1989 after its first
# 800 updates) where online VB's moves by under 1 % (353 to 363 on the example corpus)
RISE_WINDOW = 3
RISE_MARGIN = 0.02
CURVE_KEYS = ("perplexity_point", "perplexity_train_heldout_point")


def curve_rise(records: list[dict]) -> str | None:
    """One line saying that the in-training held-out perplexity of ``records`` (metrics.jsonl)
    rose at the end of training, or None when it did not, or has fewer than two windows of
    RISE_WINDOW evaluations."""
    for key in CURVE_KEYS:
        # NaN: an evaluation that skipped this estimate (deep LDA's point_perplexity.every)
        points = [(int(r["step"]), float(r[key])) for r in records
                  if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])
                  and "step" in r]
        if points:
            break
    else:
        return None
    w = RISE_WINDOW
    if len(points) < 2 * w:
        return None
    values = [value for _, value in points]
    means = [statistics.fmean(values[i:i + w]) for i in range(len(values) - w + 1)]
    earlier = means[:-w]                # the windows that end before the last one starts
    best = min(range(len(earlier)), key=earlier.__getitem__)
    scatter = statistics.median(abs(b / a - 1) for a, b in itertools.pairwise(values) if a)
    margin = max(RISE_MARGIN, 2 * scatter)
    if means[-1] <= earlier[best] * (1 + margin):
        return None
    return (f"the held-out perplexity rose at the end: {means[-1]:.1f}, the mean of the last "
            f"{w} evaluations (steps {points[-w][0]}-{points[-1][0]}), is "
            f"{means[-1] / earlier[best] - 1:.1%} above its best, {earlier[best]:.1f} "
            f"(steps {points[best][0]}-{points[best + w - 1][0]}), more than the curve's "
            f"scatter allows ({margin:.1%}): overfitting, or steps too large; fewer "
            f"inference.iterations or a smaller step size may score better")
