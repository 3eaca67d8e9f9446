"""Fixtures for the command-line tests: the example corpus prepared once per session, and a
headless Chromium (Debian's ``chromium``, driven by Playwright) for the pages' tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration._chromium import find_chromium
from tests.integration._cli import EXAMPLE, ok


@pytest.fixture(scope="session")
def example_store(tmp_path_factory) -> Path:
    """The bundled example corpus (341 documents) prepared once: 10 % test documents."""
    out = tmp_path_factory.mktemp("example") / "store"
    outcome = ok("prepare", EXAMPLE, "--out", out)
    assert "documents:    307 train, 34 test (341 read" in outcome.stdout
    return out


@pytest.fixture(scope="session")
def other_store(tmp_path_factory) -> Path:
    """The same text with another split seed: a different corpus store."""
    out = tmp_path_factory.mktemp("other") / "store"
    ok("prepare", EXAMPLE, "--out", out, "--seed", "9")
    return out


@pytest.fixture(scope="session")
def meta_store(tmp_path_factory) -> Path:
    """The example corpus with a categorical and a numeric made-up covariate (the DMR
    algorithms need document features)."""
    from tests.golden.cases import write_meta_corpus
    folder = tmp_path_factory.mktemp("meta")
    out = folder / "store"
    ok("prepare", write_meta_corpus(folder / "meta.jsonl"), "--meta", "group:cat,score",
       "--out", out)
    return out


@pytest.fixture(scope="session")
def time_store(tmp_path_factory) -> Path:
    """The example corpus with a made-up year, four slices of consecutive documents (the
    dynamic topic model needs time slices)."""
    from tests.golden.cases import write_meta_corpus
    folder = tmp_path_factory.mktemp("time")
    out = folder / "store"
    ok("prepare", write_meta_corpus(folder / "meta.jsonl"), "--time-column", "year",
       "--out", out)
    return out


REPORT_DLDA = ["inference.algorithm=dlda-sgrld", "inference.iterations=12",
               "inference.burn_in=6", "inference.local_burn_in=6", "inference.local_samples=3",
               "training.eval_every=3", "training.checkpoint_every=6", "inference.step.a=0.1",
               "inference.step.c=0.9", "inference.point_perplexity.iterations=6",
               "inference.point_perplexity.last=3", "inference.point_perplexity.every=6"]
REPORT_DMR = ["inference.iterations=24", "inference.burn_in=12", "inference.thin=4",
              "inference.optimize_burn_in=8", "inference.optimize_interval=8",
              "training.eval_every=8", "training.checkpoint_every=8"]


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory, example_store) -> dict[str, Path]:
    """Short runs on the example corpus for the report: two Gibbs runs (K = 6 and K = 8), an
    online VB run, a deep LDA run (layers 16-8-4) and a DMR run on the corpus with two made-up
    covariates (another store)."""
    from tests.golden.cases import write_meta_corpus
    from tests.integration._cli import REPO, write_config

    folder = tmp_path_factory.mktemp("report-runs")
    runs = {}
    for name, topics in (("gibbs", 6), ("gibbs8", 8)):
        config = write_config(folder, example_store, f"{name}.yaml",
                              output=str(folder / name), model={"topics": topics})
        ok("train", "--config", config, "-q")
        runs[name] = folder / name
    configs = REPO / "configs"
    runs["ovb"] = folder / "ovb"            # the variational family
    ok("train", "--config", configs / "example_ovb.yaml", "--out", runs["ovb"], "-q",
       "--set", f"corpus={example_store}", "--set", "inference.iterations=20")
    runs["dlda"] = folder / "dlda"
    ok("train", "--config", configs / "example_dlda.yaml", "--out", runs["dlda"], "-q",
       "--set", f"corpus={example_store}", *_sets(REPORT_DLDA))
    meta = folder / "meta-store"
    ok("prepare", write_meta_corpus(folder / "meta.jsonl"), "--meta", "group:cat,score",
       "--out", meta)
    runs["dmr"] = folder / "dmr"
    ok("train", "--config", configs / "example_dmr_sem.yaml", "--out", runs["dmr"], "-q",
       "--set", f"corpus={meta}", *_sets(REPORT_DMR))
    return runs


def _sets(overrides: list[str]) -> list[str]:
    return [part for item in overrides for part in ("--set", item)]


@pytest.fixture(scope="module")
def browser():
    """One Chromium per test module (closed before the next module's tests run); without
    chromium on PATH its tests are skipped, or fail when CI is set (see ``_chromium.py``)."""
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        yield launched
        launched.close()
