"""Run directories written before the drivers were reorganised (``runs_v1/``, see
``record_runs.py``) still load: their middle checkpoint scores as it did, and resuming it
finishes with exactly the model the uninterrupted run wrote. Particle EM has since changed
its algorithm (per-document particle weights, docs/algorithms.md §10.3): its old run still
scores as it did, and resuming it is refused, since no config continues its chain."""
from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.golden.cases import CASES, RTOL, RTOL_DMR, close, strip_volatile
from tests.golden.record_runs import RUNS, finish
from tests.golden.runs import invoke, prepare_stores

CHANGED = {"pem"}          # algorithms whose chain changed since runs_v1 was written


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    return prepare_stores(tmp_path_factory.mktemp("old-runs"))


@pytest.mark.parametrize("name", [c[0] for c in CASES if c[0] not in CHANGED])
def test_old_run_scores_and_resumes(stores, tmp_path, name):
    expected = json.loads((RUNS / name / "expected.json").read_text())
    run = tmp_path / name
    shutil.copytree(RUNS / name, run, ignore=shutil.ignore_patterns("expected.json"))
    got = finish(run, stores, expected["store"])
    rtol = RTOL_DMR if name.startswith("dmr") else RTOL
    assert close(got["checkpoint_evaluate"], expected["checkpoint_evaluate"], rtol)
    assert close(got["model"], expected["model"], rtol)


def test_old_particle_em_run_scores_and_is_not_resumed(stores, tmp_path):
    expected = json.loads((RUNS / "pem" / "expected.json").read_text())
    run = tmp_path / "pem"
    shutil.copytree(RUNS / "pem", run, ignore=shutil.ignore_patterns("expected.json"))
    config = yaml.safe_load((run / "config.yaml").read_text())
    config.update(corpus=str(stores[expected["store"]]), output=str(run))
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    scored = strip_volatile(json.loads(invoke("evaluate", run, "--json", "--checkpoint", "5")))
    assert close(scored, expected["checkpoint_evaluate"], RTOL)
    with pytest.raises(RuntimeError, match=r"exited 2: .*--resume continues the run as it "
                                           r"was configured.*inference\.anneal_steps"):
        invoke("train", "--config", run / "config.yaml", "--resume", "--quiet")
