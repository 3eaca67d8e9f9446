"""Run directories written before the drivers were reorganised (``runs_v1/``, see
``record_runs.py``) still load: their middle checkpoint scores as it did, and resuming it
finishes with exactly the model the uninterrupted run wrote."""
from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.golden.cases import CASES, npz_digest, strip_volatile
from tests.golden.record_runs import RUNS
from tests.golden.runs import invoke, prepare_stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return prepare_stores(tmp_path_factory.mktemp("old-runs"))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_old_run_scores_and_resumes(stores, tmp_path, name):
    expected = json.loads((RUNS / name / "expected.json").read_text())
    run = tmp_path / name
    shutil.copytree(RUNS / name, run)
    (run / "expected.json").unlink()
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["corpus"] = str(stores[expected["store"]])
    config["output"] = str(run)
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    step = int(next((run / "checkpoints").glob("step-*.npz")).stem.split("-")[1])
    scored = json.loads(invoke("evaluate", run, "--json", "--checkpoint", str(step)))
    assert strip_volatile(scored) == expected["checkpoint_evaluate"]
    invoke("train", "--config", run / "config.yaml", "--resume", "--quiet")
    assert npz_digest(run / "model.npz") == expected["model"]
