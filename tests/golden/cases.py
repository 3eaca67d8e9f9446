"""The runs whose outputs must not change when the code is reorganised: one short, fully
specified run of every algorithm, at 1 and at 2 threads.

``python -m tests.golden.record`` writes ``outputs.json`` from the code as it is; the test
(``test_golden.py``) trains the same runs again and compares every output. Integer arrays
(counts, assignments) and every string must be equal; floating-point numbers are compared to
``RTOL`` because NumPy's and SciPy's reductions may round the last bits differently on another
CPU or release (same machine, same libraries: ``record --out FILE`` on two commits and ``cmp``
for bit-for-bit). Record anew only when a change is meant to change numbers, and say which in
its commit message.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import re
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "python_reference.txt"


def write_meta_corpus(path: Path) -> Path:
    """The bundled example corpus as JSONL with three metadata fields made up from each line's
    position (a category, a number and a year), so that the DMR and dynamic topic model cases
    run on what the repository holds: fixed, synthetic covariates and times, not data about
    the documents."""
    lines = [line for line in EXAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    records = [{"text": line, "group": "abc"[i % 3], "score": round((i * 7 % 11) / 10, 1),
                "year": 2001 + 4 * i // len(lines)}
               for i, line in enumerate(lines)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
OUTPUTS = Path(__file__).with_name("outputs.json")

# defaults pinned to what every case was recorded with, since a default that changes must not
# change a recorded chain: the in-training curve scores every test document with the full
# fold-in (its defaults are a subset and a shorter fold-in now)
PINNED = ["evaluation.curve_docs=null", "evaluation.curve_fold_in_sweeps=null"]

# (name, example config, overrides): short runs that still pass sample collection, alpha or nu
# updates, evaluation and checkpoints, with AD-LDA / CVB chunks fixed so that 2 threads work
CASES: list[tuple[str, str, list[str]]] = [
    ("gibbs", "example_gibbs.yaml",
     ["inference.iterations=24", "inference.burn_in=12", "inference.thin=4",
      "inference.chunks=3", "model.alpha=auto", "inference.optimize_burn_in=8",
      "inference.optimize_interval=4", "training.eval_every=8", "training.checkpoint_every=8",
      "evaluation.fold_in_sweeps=10", "evaluation.fold_in_burn_in=5"]),
    ("gibbs-dense", "example_gibbs.yaml",
     ["inference.iterations=12", "inference.burn_in=6", "inference.thin=3",
      "inference.sparse=false", "training.eval_every=6", "training.checkpoint_every=6",
      "evaluation.fold_in_sweeps=10", "evaluation.fold_in_burn_in=5"]),
    ("vb", "example_vb.yaml",
     ["inference.iterations=12", "training.eval_every=4", "training.checkpoint_every=4",
      "inference.best_iterations=4", "inference.best_every=3"]),
    ("cvb", "example_cvb.yaml",
     ["inference.iterations=12", "inference.chunks=3", "inference.check_every=4",
      "inference.refresh_every=4", "training.eval_every=4", "training.checkpoint_every=4"]),
    ("cvb0", "example_cvb0.yaml",
     ["inference.iterations=12", "inference.chunks=3", "inference.check_every=4",
      "inference.refresh_every=4", "training.eval_every=4", "training.checkpoint_every=4"]),
    ("ovb", "example_ovb.yaml",
     ["inference.iterations=40", "training.eval_every=10", "training.checkpoint_every=20",
      "model.alpha=auto"]),
    ("hsvg", "example_hsvg.yaml",
     ["inference.iterations=30", "training.eval_every=10", "training.checkpoint_every=10"]),
    ("sgrld", "example_sgrld.yaml",
     ["inference.iterations=30", "inference.burn_in=15", "inference.samples=3",
      "training.eval_every=10", "training.checkpoint_every=10"]),
    ("pem", "example_pem.yaml",
     ["inference.iterations=10", "training.eval_every=5", "training.checkpoint_every=5"]),
    ("tlasgr", "example_dlda.yaml",
     ["inference.iterations=16", "inference.burn_in=8", "inference.local_burn_in=6",
      "inference.local_samples=3", "training.eval_every=4", "training.checkpoint_every=8",
      "inference.point_perplexity.iterations=6", "inference.point_perplexity.last=3",
      "inference.point_perplexity.every=8"]),
    ("tlfsgr", "example_dlda.yaml",
     ["inference.algorithm=tlfsgr", "inference.iterations=12", "inference.burn_in=6",
      "inference.local_burn_in=6", "inference.local_samples=3", "training.eval_every=3",
      "training.checkpoint_every=6", "inference.point_perplexity.iterations=6",
      "inference.point_perplexity.last=3", "inference.point_perplexity.every=6"]),
    ("dlda-sgrld", "example_dlda.yaml",
     ["inference.algorithm=dlda-sgrld", "inference.iterations=12", "inference.burn_in=6",
      "inference.local_burn_in=6", "inference.local_samples=3", "training.eval_every=3",
      "training.checkpoint_every=6", "inference.step.a=0.1", "inference.step.c=0.9",
      "inference.point_perplexity.iterations=6", "inference.point_perplexity.last=3",
      "inference.point_perplexity.every=6"]),
    ("dlda-gibbs", "golden:dlda_gibbs.yaml", []),
    ("dmr-sem", "example_dmr_sem.yaml",
     ["inference.iterations=24", "inference.burn_in=12", "inference.thin=4",
      "inference.chunks=3", "inference.optimize_burn_in=8", "inference.optimize_interval=8",
      "training.eval_every=8", "training.checkpoint_every=8",
      "evaluation.fold_in_sweeps=10", "evaluation.fold_in_burn_in=5"]),
    ("dmr-sgrld", "example_dmr_sgrld.yaml",
     ["inference.iterations=30", "inference.burn_in=15", "inference.samples=3",
      "training.eval_every=10", "training.checkpoint_every=10"]),
]

# cases of schedules added after runs_v1/ was written (record_runs.py), so with no old run:
# the partitioned schedule (docs/algorithms.md §2.8) with 3 blocks, 2 threads sharing them,
# SparseLDA and the dense sampler chosen per sweep, n_k taken at every epoch and (flowing, 5
# blocks) carried through the sweep; DMR's prior per document with 2 blocks; and
# the keyword topic model on 2 AD-LDA chunks with alpha learnt
LATER_CASES: list[tuple[str, str, list[str]]] = [
    ("gibbs-blocks", "example_gibbs.yaml",
     ["inference.iterations=24", "inference.burn_in=12", "inference.thin=4",
      "inference.chunks=null", "inference.blocks=3", "inference.block_sync=epoch",
      "inference.sparse=auto", "model.alpha=auto",
      "inference.optimize_burn_in=8", "inference.optimize_interval=4", "training.eval_every=8",
      "training.checkpoint_every=8", "evaluation.fold_in_sweeps=10",
      "evaluation.fold_in_burn_in=5"]),
    ("gibbs-flowing", "example_gibbs.yaml",
     ["inference.iterations=24", "inference.burn_in=12", "inference.thin=4",
      "inference.chunks=null", "inference.blocks=5", "inference.block_sync=sweep",
      "inference.sparse=auto", "model.alpha=auto",
      "inference.optimize_burn_in=8", "inference.optimize_interval=4", "training.eval_every=8",
      "training.checkpoint_every=8", "evaluation.fold_in_sweeps=10",
      "evaluation.fold_in_burn_in=5"]),
    ("dmr-sem-blocks", "example_dmr_sem.yaml",
     ["inference.iterations=24", "inference.burn_in=12", "inference.thin=4",
      "inference.chunks=null", "inference.blocks=2", "inference.block_sync=epoch",
      "inference.optimize_burn_in=8",
      "inference.optimize_interval=8", "training.eval_every=8", "training.checkpoint_every=8",
      "evaluation.fold_in_sweeps=10", "evaluation.fold_in_burn_in=5"]),
    ("keyatm", "example_keyatm.yaml",
     ["inference.iterations=24", "inference.burn_in=12", "inference.thin=4",
      "inference.chunks=2", "model.alpha=auto", "inference.optimize_burn_in=8",
      "inference.optimize_interval=4", "training.eval_every=8", "training.checkpoint_every=8",
      "evaluation.fold_in_sweeps=10", "evaluation.fold_in_burn_in=5"]),
]

# keys of evaluate --json and metrics.jsonl that are clock readings or paths, not numbers
VOLATILE = {"run", "train_seconds", "eval_seconds", "seconds", "wall_seconds"}


# relative tolerance for floating-point outputs. DMR's ν comes out of SciPy's L-BFGS, whose
# last bits depend on the SciPy build, and the prior it gives feeds the sampler's weights.
RTOL = 1e-9
RTOL_DMR = 1e-5


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sketch(array: np.ndarray) -> list[float]:
    """Sum, sum of squares and four fixed random projections of a float array: any change
    larger than rounding moves them, and they can be compared to a tolerance."""
    flat = np.asarray(array, dtype=np.float64).ravel()
    weights = np.random.default_rng(20261125).standard_normal((4, flat.size))
    return [float(flat.sum()), float(flat @ flat), *map(float, weights @ flat)]


def npz_digest(path: Path) -> dict:
    """Every array of a saved model (sha256 of integer arrays, a sketch of float ones), and
    its header less the training clock and the state's layout version."""
    out = {}
    with zipfile.ZipFile(path) as zf:
        for name in sorted(zf.namelist()):
            array = np.load(io.BytesIO(zf.read(name)), allow_pickle=False)
            if name == "header.npy":
                header = json.loads(array.tobytes().decode("utf-8"))
                header.pop("clock", None)
                # the layout version of the state, saved since states declare their layout
                header["state"].pop("schema", None)
                out["header"] = header
            elif array.dtype.kind == "f":
                out[name] = [str(array.dtype), list(array.shape), sketch(array)]
            else:
                out[name] = [str(array.dtype), list(array.shape),
                             digest(np.ascontiguousarray(array).tobytes())]
    return out


NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def text_numbers(text: str) -> list:
    """A command's output as tokens, the numeric ones as floats (compared to a tolerance;
    words such as "nan" or "inf" stay words)."""
    return [float(token) if NUMBER.fullmatch(token) else token
            for token in re.split(r"([\s,:\[\]{}\"]+)", text)]


def close(got, expected, rtol: float) -> bool:
    """Equal, except floats within ``rtol`` of each other (NaN equals NaN)."""
    if isinstance(got, float) or isinstance(expected, float):
        if not isinstance(got, (int, float)) or not isinstance(expected, (int, float)):
            return False
        if math.isnan(got) or math.isnan(expected):
            return math.isnan(got) and math.isnan(expected)
        return math.isclose(got, expected, rel_tol=rtol, abs_tol=rtol * 1e-3)
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(close(got[k], expected[k], rtol)
                                                     for k in got)
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(close(a, b, rtol)
                                                 for a, b in zip(got, expected))
    return got == expected


def strip_volatile(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in VOLATILE}
