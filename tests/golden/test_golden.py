"""Every algorithm gives exactly the outputs recorded in ``outputs.json`` (see ``cases.py``):
the same chains, scores, topics and inferred proportions at 1 and at 2 threads."""
from __future__ import annotations

import json

import pytest

from tests.golden.cases import CASES, LATER_CASES, OUTPUTS, RTOL, RTOL_DMR, close
from tests.golden.runs import prepare_stores, run_case

RECORDED = json.loads(OUTPUTS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def golden_work(tmp_path_factory):
    work = tmp_path_factory.mktemp("golden")
    return work, prepare_stores(work)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name,config,overrides", CASES + LATER_CASES,
                         ids=[c[0] for c in CASES + LATER_CASES])
def test_outputs_unchanged(golden_work, name, config, overrides, threads):
    work, stores = golden_work
    got = run_case(name, config, overrides, threads, work, stores)
    expected = RECORDED[name]
    for part in ("metrics", "evaluate", "model", "topics", "infer"):
        rtol = RTOL_DMR if name.startswith("dmr") else RTOL
        assert close(got[part], expected[part], rtol), \
            f"{name}, {threads} thread(s): {part} changed"
