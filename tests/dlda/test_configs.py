"""The shipped configs validate, and the Table 1 configs share the paper's schedule
(Cong et al. 2017, §5: mini-batches of 200, 2000 burn-in updates, 1500 collected samples)."""
from __future__ import annotations

from pathlib import Path

import pytest

from topictk.inference.registry import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TABLE1 = sorted(CONFIGS.glob("20news_dlda_*.yaml"))


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_config_validates(path):
    cfg = load_config(path)
    assert cfg.inference.algorithm


def test_table1_has_every_method_and_size():
    names = {p.stem for p in TABLE1}
    assert names == {f"20news_dlda_{m}_{s}" for m in ("tlasgr", "tlfsgr", "sgrld", "gibbs")
                     for s in ("128", "128-64", "128-64-32")}


@pytest.mark.parametrize("path", TABLE1, ids=lambda p: p.stem)
def test_table1_configs_follow_the_paper(path):
    cfg = load_config(path)
    method, size = path.stem.split("_")[2:]
    assert cfg.model.layers == [int(k) for k in size.split("-")]
    assert cfg.inference.iterations == 3500 and cfg.inference.burn_in == 2000
    assert cfg.inference.algorithm == {"sgrld": "dlda-sgrld", "gibbs": "dlda-gibbs"}.get(
        method, method)
    if method != "gibbs":
        assert cfg.inference.batch_size == 200
    assert cfg.training.eval_every == 1      # the persistent test chain after every update
