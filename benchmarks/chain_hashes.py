"""Hashes of every chain, to show that a change of code changes no number.

Trains each bundled example config and the collapsed-Gibbs samplers' variants on the bundled
corpus, at 1 and 2 threads (and with ``--cluster`` on a 2-worker local Dask cluster where the
algorithm runs on one), then hashes, bit for bit: the final model's arrays and state header,
every saved sample, ``metrics.jsonl`` without its wall-clock and traffic fields, and the JSON
of ``topictk evaluate``.

    python benchmarks/chain_hashes.py --record before.json        # on the old code
    python benchmarks/chain_hashes.py --check before.json         # on the new code

``--check`` exits 1 and lists every case whose hash differs or that was recorded and not run;
a case the file does not hold (added since) is listed and not compared.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.golden.runs import write_meta_corpus  # noqa: E402  (the DMR examples' covariates)

EXAMPLE = REPO / "examples" / "python_reference.txt"

# metrics fields that measure the machine, not the chain
_CLOCK = ("train_seconds", "eval_seconds")


def _gibbs_variants() -> list[tuple[str, str, dict]]:
    inference = {"iterations": 30, "burn_in": 10, "thin": 5}
    variants = {
        "sparse": {}, "dense": {"sparse": False}, "auto": {"sparse": "auto"},
        "warp": {"sampler": "warp"}, "mh": {"sampler": "mh"}, "chunks2": {"chunks": 2},
        "blocks1": {"chunks": None, "blocks": 1}, "blocks3": {"chunks": None, "blocks": 3},
        "alpha-auto": {"optimize_interval": 5, "optimize_burn_in": 10},
    }
    cases = []
    for name, extra in variants.items():
        model = {"topics": 12, "alpha": "auto" if name == "alpha-auto" else 0.1}
        cases.append((f"gibbs-{name}", "example_gibbs.yaml",
                      {"model": model, "inference": {**inference, **extra}}))
    cases.append(("gibbs-mh-fold-in", "example_gibbs.yaml",
                  {"inference": inference, "evaluation": {"fold_in": "mh"}}))
    cases.append(("dmr-sem-mh", "example_dmr_sem.yaml", {"inference": {"sampler": "mh"}}))
    return cases


# seed words of the example corpus for the seeded cases (the keyword topic model's example
# config has its own)
SEEDS = {"exceptions": ["exception", "raised", "raise", "try"],
         "dictionaries": ["dictionary", "key", "keys", "mapping", "hash"],
         "numbers": ["number", "integer", "float", "decimal", "numbers"]}


def _seeded() -> list[tuple[str, str, dict]]:
    """Seeded chains: Gibbs on AD-LDA chunks (also on a cluster), and CVB."""
    return [("seeded-gibbs", "example_gibbs.yaml",
             {"model": {"topics": 12, "seed_words": SEEDS},
              "inference": {"iterations": 30, "burn_in": 10, "thin": 5, "chunks": 2}}),
            ("seeded-cvb", "example_cvb.yaml", {"model": {"seed_words": SEEDS}})]


def cases() -> list[tuple[str, str, dict]]:
    found = [(p.stem[len("example_"):], p.name, {})
             for p in sorted((REPO / "configs").glob("example_*.yaml"))]
    return found + _gibbs_variants() + _seeded()


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(base.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _npz_digest(path: Path) -> str:
    h = hashlib.sha256()
    with np.load(path, allow_pickle=False) as data:
        for name in sorted(data.files):
            array = data[name]
            if name == "header":
                header = json.loads(bytes(array).decode())
                header.pop("clock", None)      # seconds trained: the machine's
                h.update(json.dumps(header, sort_keys=True).encode())
            else:
                h.update(name.encode() + str(array.dtype).encode() + str(array.shape).encode())
                h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


def _topictk(*args) -> str:
    done = subprocess.run([sys.executable, "-m", "topictk", *map(str, args)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"topictk {' '.join(map(str, args))}: {done.stderr.strip()}")
    return done.stdout


def run_case(work: Path, stores: dict[str, Path], name: str, config: str, extra: dict,
             threads: int, cluster: bool) -> str | None:
    data = yaml.safe_load((REPO / "configs" / config).read_text())
    data = _merge(data, extra)
    data["corpus"] = str(stores["meta" if config.startswith("example_dmr") else "example"])
    tag = f"{name}-t{threads}{'-cluster' if cluster else ''}"
    data["output"] = str(work / tag)
    data.setdefault("training", {})["threads"] = threads
    if cluster:
        data["training"]["dask_workers"] = 2
    path = work / f"{tag}.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        _topictk("train", "--config", path, "--quiet", "--force")
    except RuntimeError as exc:
        if cluster and "Dask cluster" in str(exc):
            return None                 # the algorithm does not run on a cluster
        raise
    run = work / tag
    metrics = [{k: v for k, v in json.loads(line).items()
                if k not in _CLOCK and not k.startswith("cluster_")}
               for line in (run / "metrics.jsonl").read_text().splitlines()]
    scored = json.loads(_topictk("evaluate", run, "--json"))
    scored.pop("run", None)
    scored.pop("estimator", None)   # the estimator's name: a label the perplexity already follows
    parts = {"model": _npz_digest(run / "model.npz"), "metrics": _digest(metrics),
             "evaluate": _digest(scored),
             "samples": [_npz_digest(p) for p in sorted((run / "samples").glob("*.npz"))]}
    return _digest(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--record", type=Path)
    what.add_argument("--check", type=Path)
    parser.add_argument("--cluster", action="store_true",
                        help="also on a 2-worker local Dask cluster")
    parser.add_argument("--only", help="cases whose name contains this")
    args = parser.parse_args()
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stores = {"example": work / "store", "meta": work / "meta-store"}
        _topictk("prepare", EXAMPLE, "--out", stores["example"])
        meta = write_meta_corpus(work / "example-meta.jsonl")
        _topictk("prepare", meta, "--meta", "group,score", "--out", stores["meta"])
        for name, config, extra in cases():
            if args.only and args.only not in name:
                continue
            for threads in (1, 2):
                got[f"{name}/t{threads}"] = run_case(work, stores, name, config, extra,
                                                     threads, False)
            if args.cluster:
                digest = run_case(work, stores, name, config, extra, 1, True)
                if digest is not None:
                    got[f"{name}/cluster"] = digest
            print(name, file=sys.stderr)
    if args.record:
        args.record.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"{len(got)} chains recorded in {args.record}")
        return 0
    expected = json.loads(args.check.read_text())
    differ = [k for k in got if k in expected and expected[k] != got[k]]
    unknown = [k for k in got if k not in expected]
    missing = [k for k in expected if k not in got and not args.only]
    for key in differ:
        print(f"differs: {key}")
    for key in unknown:                 # a case added after the file was recorded
        print(f"no recorded hash (new case): {key}")
    for key in missing:
        print(f"not run: {key}")
    same = len(got) - len(differ) - len(unknown)
    print(f"{same} of {len(got) - len(unknown)} recorded chains identical to {args.check}")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main())
