"""Training killed with SIGKILL at random moments and resumed ends bit for bit where an
uninterrupted run ends, for one algorithm of every family (benchmarks/soak_resume.py; the long
run, 50 kills per family, is recorded in benchmarks/results/safety.md)."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "soak_resume.py"
_spec = importlib.util.spec_from_file_location("soak_resume", _PATH)
soak_resume = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(soak_resume)

CYCLES = int(os.environ.get("TOPICTK_SOAK_CYCLES", "4"))


@pytest.mark.slow
@pytest.mark.parametrize("family", list(soak_resume.FAMILIES))
def test_kill_and_resume_ends_bit_for_bit(tmp_path, family):
    summary = soak_resume.soak([family], CYCLES, seed=11, work=tmp_path, jobs=1,
                               log=lambda message: None)
    result = summary["families"][0]
    assert result["cycles"] >= CYCLES
    assert result["problems"] == [], json.dumps(result, indent=2)


def test_a_damaged_model_is_reported_by_the_comparison(tmp_path):
    """The comparison itself sees one changed bit and one missing metrics line."""
    import numpy as np

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        header = np.frombuffer(json.dumps({"clock": {"train_seconds": 1.0, "tokens_seen": 5},
                                           "step": 3}).encode(), np.uint8)
        np.savez(tmp_path / name / "model.npz", header=header, a_x=np.arange(4.0))
        (tmp_path / name / "metrics.jsonl").write_text('{"step": 1, "train_seconds": 0.5}\n'
                                                        '{"step": 2, "train_seconds": 0.7}\n')
    assert soak_resume.compare_runs(tmp_path / "a", tmp_path / "b") == []
    x = np.arange(4.0)
    x.view(np.uint64)[2] ^= 1
    header = np.frombuffer(json.dumps({"clock": {"train_seconds": 9.0, "tokens_seen": 5},
                                       "step": 3}).encode(), np.uint8)
    np.savez(tmp_path / "b" / "model.npz", header=header, a_x=x)
    (tmp_path / "b" / "metrics.jsonl").write_text('{"step": 1, "train_seconds": 0.5}\n')
    assert soak_resume.compare_runs(tmp_path / "a", tmp_path / "b") == [
        "model.npz array a_x differs", "metrics.jsonl differs: 2 lines vs 1"]
