"""Write ``tests/golden/runs_v1/``: for every golden case, the run directory of a run stopped
at its middle checkpoint (config, metrics, checkpoint, samples) and what finishing it gives,
so that run directories written by earlier releases are checked to resume and score the same.

    python -m tests.golden.record_runs                    # new fixtures from the code as it is
    python -m tests.golden.record_runs --expected-only    # keep the runs, recompute expected.json
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

from tests.golden.cases import CASES, npz_digest, strip_volatile
from tests.golden.runs import invoke, prepare_stores, run_case

RUNS = Path(__file__).with_name("runs_v1")


def finish(run: Path, stores: dict[str, Path], store: str) -> dict:
    """Score a kept run's checkpoint and resume it to the end, in a copy under ``run``'s
    place; the outputs ``expected.json`` holds."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["corpus"] = str(stores[store])
    config["output"] = str(run)
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    step = int(next((run / "checkpoints").glob("step-*.npz")).stem.split("-")[1])
    scored = strip_volatile(json.loads(invoke("evaluate", run, "--json", "--checkpoint",
                                              str(step))))
    invoke("train", "--config", run / "config.yaml", "--resume", "--quiet")
    return {"store": store, "checkpoint_evaluate": scored, "model": npz_digest(run / "model.npz")}


def expected_only() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stores = prepare_stores(work)
        for name, _, _ in CASES:
            store = json.loads((RUNS / name / "expected.json").read_text())["store"]
            run = work / name
            shutil.copytree(RUNS / name, run, ignore=shutil.ignore_patterns("expected.json"))
            (RUNS / name / "expected.json").write_text(
                json.dumps(finish(run, stores, store), indent=1, sort_keys=True) + "\n")


def main() -> None:
    if "--expected-only" in sys.argv:
        expected_only()
        return
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
                "store": "meta" if config.startswith("example_dmr") else "example",
                "checkpoint_evaluate": strip_volatile(json.loads(invoke(
                    "evaluate", run, "--json", "--checkpoint", str(step)))),
                "model": npz_digest(run / "model.npz")}
            (kept / "expected.json").write_text(json.dumps(finished, indent=1, sort_keys=True)
                                                + "\n")


if __name__ == "__main__":
    main()
