"""Run directories written before the drivers were reorganised (``runs_v1/``, see
``record_runs.py``) still load: their middle checkpoint scores as it did, and resuming it
finishes with exactly the model the uninterrupted run wrote."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.golden.cases import CASES, RTOL, RTOL_DMR, close
from tests.golden.record_runs import RUNS, finish
from tests.golden.runs import prepare_stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return prepare_stores(tmp_path_factory.mktemp("old-runs"))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_old_run_scores_and_resumes(stores, tmp_path, name):
    expected = json.loads((RUNS / name / "expected.json").read_text())
    run = tmp_path / name
    shutil.copytree(RUNS / name, run, ignore=shutil.ignore_patterns("expected.json"))
    got = finish(run, stores, expected["store"])
    rtol = RTOL_DMR if name.startswith("dmr") else RTOL
    assert close(got["checkpoint_evaluate"], expected["checkpoint_evaluate"], rtol)
    assert close(got["model"], expected["model"], rtol)
