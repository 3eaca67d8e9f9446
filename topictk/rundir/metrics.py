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
