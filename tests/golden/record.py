"""Write ``tests/golden/outputs.json`` from the code as it is (see ``cases.py``).

    python -m tests.golden.record [--out FILE]
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
    recorded = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stores = prepare_stores(work)
        for name, config, overrides in CASES + LATER_CASES:
            outputs = run_case(name, config, overrides, 1, work, stores)
            again = run_case(name, config, overrides, 2, work, stores)
            if not close(again, outputs, rtol=0.0):
                sys.exit(f"{name}: 2 threads give other outputs than 1 thread")
            recorded[name] = outputs
            print(name, outputs["evaluate"].get("perplexity"), file=sys.stderr)
    out.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
