"""Write ``tests/golden/runs_v1/``: for every golden case, the run directory of a run stopped
at its middle checkpoint (config, metrics, checkpoint, samples) and what finishing it gives,
so that run directories written by earlier releases are checked to resume and score the same.

    python -m tests.golden.record_runs
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import yaml

from tests.golden.cases import CASES, npz_digest, strip_volatile
from tests.golden.runs import invoke, prepare_stores, run_case

RUNS = Path(__file__).with_name("runs_v1")


def main() -> None:
    if RUNS.exists():
        shutil.rmtree(RUNS)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stores = prepare_stores(work)
        for name, config, overrides in CASES:
            run_case(name, config, overrides, 1, work, stores)
            run = work / f"{name}-t1"
            kept = RUNS / name
            checkpoints = sorted((run / "checkpoints").glob("step-*.npz"))
            middle = checkpoints[0]
            (kept / "checkpoints").mkdir(parents=True)
            shutil.copy2(middle, kept / "checkpoints" / middle.name)
            step = int(middle.stem.split("-")[1])
            if (run / "samples").is_dir():
                (kept / "samples").mkdir()
                for sample in sorted((run / "samples").glob("step-*.npz")):
                    if int(sample.stem.split("-")[1]) <= step:
                        shutil.copy2(sample, kept / "samples" / sample.name)
            lines = [line for line in (run / "metrics.jsonl").read_text().splitlines()
                     if json.loads(line)["step"] <= step]
            (kept / "metrics.jsonl").write_text("".join(f"{line}\n" for line in lines))
            config_data = yaml.safe_load((run / "config.yaml").read_text())
            config_data["corpus"] = "STORE"
            config_data["output"] = "RUN"
            (kept / "config.yaml").write_text(yaml.safe_dump(config_data, sort_keys=False))
            finished = {
                "store": "gadarian" if config.startswith("example_dmr") else "example",
                "checkpoint_evaluate": strip_volatile(json.loads(invoke(
                    "evaluate", run, "--json", "--checkpoint", str(step)))),
                "model": npz_digest(run / "model.npz")}
            (kept / "expected.json").write_text(json.dumps(finished, indent=1, sort_keys=True)
                                                + "\n")


if __name__ == "__main__":
    main()
