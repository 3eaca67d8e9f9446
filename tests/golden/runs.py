"""Train, evaluate, list topics and infer for one golden case through the command line."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.golden.cases import (
    EXAMPLE,
    PINNED,
    REPO,
    npz_digest,
    strip_volatile,
    text_numbers,
    write_meta_corpus,
)
from topictk.cli import cli


def invoke(*args) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"topictk {' '.join(map(str, args))} exited {result.exit_code}: "
                           f"{result.stderr}")
    return result.stdout


def prepare_stores(work: Path) -> dict[str, Path]:
    """The example store and the example as JSONL with two made-up covariates; the inputs that
    ``infer`` reads (30 documents of each)."""
    stores = {"example": work / "example-store", "meta": work / "meta-store"}
    invoke("prepare", EXAMPLE, "--out", stores["example"])
    meta = write_meta_corpus(work / "example-meta.jsonl")
    invoke("prepare", meta, "--meta", "group,score", "--out", stores["meta"])
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()[:30]
    (work / "infer-example.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = meta.read_text(encoding="utf-8").splitlines()[:30]
    (work / "infer-meta.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return stores


def run_case(name: str, config: str, overrides: list[str], threads: int, work: Path,
             stores: dict[str, Path]) -> dict:
    """Every output of one case: metrics and ``evaluate --json`` as records, ``topics`` and
    ``infer`` as tokens, the model as digests and sketches (see ``npz_digest``)."""
    dmr = config.startswith("example_dmr")
    store = stores["meta" if dmr else "example"]
    out = work / f"{name}-t{threads}"
    sets = [f"corpus={store}", f"training.threads={threads}", *PINNED, *overrides]
    path = (Path(__file__).with_name(config[len("golden:"):]) if config.startswith("golden:")
            else REPO / "configs" / config)
    args = ["train", "--config", path, "--out", out, "--quiet"]
    for s in sets:
        args += ["--set", s]
    invoke(*args)
    metrics = [strip_volatile(json.loads(line))
               for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    evaluation = strip_volatile(json.loads(invoke("evaluate", out, "--json")))
    # the topics without the run's score that heads them: that is evaluate's, recorded above
    topics = json.dumps({k: v for k, v in json.loads(invoke("topics", out, "--format", "json"))
                         .items() if k != "score"}) + "\n"
    infer_input = work / ("infer-meta.jsonl" if dmr else "infer-example.txt")
    infer = invoke("infer", out, infer_input, "--sweeps", "12", "--burn-in", "4")
    infer = infer.replace(f"{work}/", "")     # document ids name the input as it was given
    return {"metrics": metrics, "evaluate": evaluation, "topics": text_numbers(topics),
            "infer": text_numbers(infer), "model": npz_digest(out / "model.npz")}
