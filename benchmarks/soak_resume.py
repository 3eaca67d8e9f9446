"""Kill-and-resume soak: training killed (SIGKILL) at random moments and resumed, again and
again, must end with the model and metrics log of an uninterrupted run, bit for bit.

For each algorithm family (gibbs, cvb0, vb, sgrld, tlasgr, dmr-sem) one small run on the
bundled example corpus is trained once without interruption. Then *cases* are played: a case
starts the same run in a fresh directory, kills ``topictk train`` after a random delay,
continues it with ``--resume`` (or starts it again with ``--force`` when it was killed before
its first checkpoint), kills again, ... until a process completes; the case then compares
``model.npz`` (every array, and the header but for the wall-clock seconds) and
``metrics.jsonl`` (but for the seconds) with the uninterrupted run. Cases are played until
every family has been killed ``--cycles`` times. Checkpoints are written at every step, so
kills land before, between and inside checkpoint writes.

    python benchmarks/soak_resume.py --cycles 50            # the long run (about 20 minutes)
    python benchmarks/soak_resume.py --cycles 3 --families gibbs,vb

The exit status is 0 when every case matched; a summary (cases, cycles, mismatches) is printed
as one JSON object, and ``--json FILE`` writes it too. ``tests/integration/test_soak.py``
plays a few cycles per family under the slow marker.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "python_reference.txt"

COMMON_TRAINING = {"seed": 3, "threads": 1, "checkpoint_every": 1, "keep_checkpoints": 2}

# one small config per family: a few seconds of training on the example corpus
FAMILIES: dict[str, dict] = {
    "gibbs": {
        "model": {"topics": 10, "alpha": 0.1, "beta": 0.01},
        "inference": {"algorithm": "gibbs", "iterations": 60, "burn_in": 30, "thin": 10},
        "training": {"eval_every": 10},
        "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5},
    },
    "cvb0": {
        "model": {"topics": 10, "alpha": 0.1, "beta": 0.01},
        "inference": {"algorithm": "cvb0", "iterations": 60, "tol": 0, "check_every": 10,
                      "refresh_every": 10},
        "training": {"eval_every": 10},
    },
    "vb": {
        "model": {"topics": 10, "alpha": "auto", "beta": 0.01},
        "inference": {"algorithm": "vb", "iterations": 30, "tol": 0, "best_iterations": 5,
                      "best_every": 5},
        "training": {"eval_every": 5},
    },
    "sgrld": {
        "model": {"topics": 10, "alpha": 0.1, "beta": 0.01},
        "inference": {"algorithm": "sgrld", "iterations": 80, "batch_size": 32, "sweeps": 6,
                      "step": {"a": 0.01, "b": 1000, "c": 0.55}, "burn_in": 40, "thin": 10},
        "training": {"eval_every": 20},
        "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5},
    },
    "tlasgr": {
        "model": {"family": "dlda", "layers": [8, 4]},
        "inference": {"algorithm": "tlasgr", "iterations": 40, "burn_in": 20, "batch_size": 32,
                      "local_burn_in": 10, "local_samples": 6,
                      "point_perplexity": {"iterations": 20, "last": 10, "thin": 2,
                                           "every": 20}},
        "training": {"eval_every": 1},
    },
    "dmr-sem": {
        "model": {"family": "dmr", "topics": 8, "alpha": 0.1, "beta": 0.01},
        "inference": {"algorithm": "dmr-sem", "iterations": 60, "optimize_burn_in": 10,
                      "optimize_interval": 10, "burn_in": 30, "thin": 10},
        "training": {"eval_every": 10},
        "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5},
    },
}


def topictk(*args, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "topictk", *map(str, args)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)


def prepare_stores(work: Path) -> dict[str, Path]:
    """The example corpus as a plain store, and as JSONL with a categorical field for DMR."""
    plain, meta = work / "store", work / "store-meta"
    lines = [line for line in EXAMPLE.read_text(encoding="utf-8").splitlines()]
    jsonl = work / "example.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t, "group": f"g{i % 3}"}) + "\n"
                             for i, t in enumerate(lines)), encoding="utf-8")
    for args in ((EXAMPLE, "--out", plain), (jsonl, "--meta", "group:cat", "--out", meta)):
        proc = topictk("prepare", *args)
        _, err = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"prepare failed: {err.decode()}")
    return {"plain": plain, "meta": meta}


def write_config(family: str, store: Path, path: Path, output: Path) -> Path:
    spec = FAMILIES[family]
    data = {"corpus": str(store), "output": str(output), **{k: dict(v) for k, v in spec.items()}}
    data["training"] = {**COMMON_TRAINING, **spec.get("training", {})}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _timing_free(record: dict) -> dict:
    return {k: v for k, v in record.items() if "seconds" not in k}


def compare_runs(reference: Path, run: Path) -> list[str]:
    """What differs between two finished runs (empty when they agree bit for bit)."""
    problems = []
    with np.load(reference / "model.npz") as a, np.load(run / "model.npz") as b:
        if sorted(a.files) != sorted(b.files):
            return [f"model.npz arrays differ: {sorted(a.files)} vs {sorted(b.files)}"]
        for name in a.files:
            x, y = a[name], b[name]
            if name == "header":
                hx, hy = json.loads(bytes(x)), json.loads(bytes(y))
                for h in (hx, hy):
                    h["clock"].pop("train_seconds", None)
                if hx != hy:
                    problems.append(f"model.npz header differs: {hx} vs {hy}")
            elif x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                problems.append(f"model.npz array {name} differs")
    ref_lines = [_timing_free(json.loads(line)) for line in
                 (reference / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    run_lines = [_timing_free(json.loads(line)) for line in
                 (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    if ref_lines != run_lines:
        problems.append(f"metrics.jsonl differs: {len(ref_lines)} lines vs {len(run_lines)}")
    return problems


def train_once(config: Path, *extra: str, timeout: float = 600) -> tuple[int, str, float]:
    began = time.perf_counter()
    proc = topictk("train", "--config", config, "-q", *extra)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err.decode(), time.perf_counter() - began


def startup_seconds(work: Path) -> float:
    """Wall seconds until ``topictk train`` has loaded every module and read its config."""
    _, _, seconds = train_once(work / "no-such-config.yaml")
    return seconds


def kill_delay(rng: random.Random, startup: float, full: float) -> float:
    """A moment to kill at: one in five while the process starts, the rest while it trains,
    evaluates and checkpoints."""
    if rng.random() < 0.2 or full <= startup:
        return rng.uniform(0.0, startup)
    return rng.uniform(startup, full)


def play_family(family: str, store: Path, work: Path, cycles: int, rng: random.Random,
                log=print) -> dict:
    """Cases of kill-and-resume until ``cycles`` kills; returns the counts and any problems."""
    base = work / family
    base.mkdir(parents=True)
    startup = startup_seconds(base)
    ref_config = write_config(family, store, base / "reference.yaml", base / "reference")
    code, err, full = train_once(ref_config)
    if code:
        return {"family": family, "cases": 0, "cycles": 0, "problems": [f"reference: {err}"]}
    result = {"family": family, "cases": 0, "cycles": 0, "restarts_without_checkpoint": 0,
              "kills_before_first_checkpoint": 0, "uninterrupted_seconds": round(full, 2),
              "startup_seconds": round(startup, 2),
              "problems": []}
    while result["cycles"] < cycles:
        case = result["cases"]
        run_dir = base / f"case-{case}"
        config = write_config(family, store, base / f"case-{case}.yaml", run_dir)
        args: tuple[str, ...] = ()
        while True:
            started = time.perf_counter()
            proc = topictk("train", "--config", config, "-q", *args)
            delay = kill_delay(rng, startup, full)
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                proc.stderr.close()
                result["cycles"] += 1
                if (run_dir / "checkpoints").is_dir() and any(
                        p.name.startswith("step-") for p in (run_dir / "checkpoints").iterdir()):
                    args = ("--resume",)
                else:
                    result["kills_before_first_checkpoint"] += 1
                    args = ("--force",) if run_dir.exists() else ()
                continue
            err = proc.stderr.read().decode()
            proc.stderr.close()
            if proc.returncode == 0:
                if not args:
                    # a fresh run completed before its kill: kill the next ones within the time
                    # a run takes now (the uninterrupted run may have shared the machine)
                    full = max(min(full, time.perf_counter() - started), startup * 1.05)
                break
            if "--resume" in args and "no checkpoint" in err:
                args = ("--force",)
                result["restarts_without_checkpoint"] += 1
                continue
            result["problems"].append(f"case {case}: exit {proc.returncode} with "
                                      f"{' '.join(args) or 'no flags'}: {err.strip()}")
            break
        if (run_dir / "model.npz").exists():
            for problem in compare_runs(base / "reference", run_dir):
                result["problems"].append(f"case {case}: {problem}")
        result["cases"] += 1
        log(f"{family}: case {case} done, {result['cycles']} kills so far, "
            f"{len(result['problems'])} problem(s)")
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


def soak(families: list[str], cycles: int, seed: int, work: Path, jobs: int = 2,
         log=print) -> dict:
    stores = prepare_stores(work)
    began = time.perf_counter()

    def one(i_family):
        i, family = i_family
        store = stores["meta"] if family.startswith("dmr") else stores["plain"]
        return play_family(family, store, work, cycles, random.Random(seed * 1000 + i), log)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, enumerate(families)))
    return {"seed": seed, "cycles_per_family": cycles, "families": results,
            "cases": sum(r["cases"] for r in results),
            "cycles": sum(r["cycles"] for r in results),
            "problems": sum(len(r["problems"]) for r in results),
            "seconds": round(time.perf_counter() - began, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=50, help="kills per family")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated, of {', '.join(FAMILIES)}")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--jobs", type=int, default=2, help="families soaked side by side")
    parser.add_argument("--work", type=Path, default=None,
                        help="working folder (default: a temporary one, removed)")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}")
    if args.work is None:
        with tempfile.TemporaryDirectory(prefix="topictk-soak-") as tmp:
            summary = soak(families, args.cycles, args.seed, Path(tmp), args.jobs,
                           log=lambda m: print(m, file=sys.stderr, flush=True))
    else:
        args.work.mkdir(parents=True, exist_ok=True)
        summary = soak(families, args.cycles, args.seed, args.work, args.jobs,
                       log=lambda m: print(m, file=sys.stderr, flush=True))
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
