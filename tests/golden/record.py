"""Write ``tests/golden/outputs.json`` from the code as it is (see ``cases.py``).

    python -m tests.golden.record [--out FILE] [--only NAME ...]

``--only`` records the named cases alone and keeps every other case as ``outputs.json`` has
it: a new case is recorded without recording the others anew.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tests.golden.cases import CASES, LATER_CASES, OUTPUTS, close
from tests.golden.runs import prepare_stores, run_case


def main() -> None:
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else OUTPUTS
    only = sys.argv[sys.argv.index("--only") + 1:] if "--only" in sys.argv else None
    if only and "--out" in only:
        sys.exit("give --out before --only")
    recorded = json.loads(OUTPUTS.read_text(encoding="utf-8")) if only else {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stores = prepare_stores(work)
        for name, config, overrides in CASES + LATER_CASES:
            if only and name not in only:
                continue
            outputs = run_case(name, config, overrides, 1, work, stores)
            again = run_case(name, config, overrides, 2, work, stores)
            if not close(again, outputs, rtol=0.0):
                sys.exit(f"{name}: 2 threads give other outputs than 1 thread")
            recorded[name] = outputs
            print(name, outputs["evaluate"].get("perplexity"), file=sys.stderr)
    out.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
