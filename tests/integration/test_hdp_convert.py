"""An HDP run (``model.family: hdp``) turned into a fixed-K LDA run with ``topictk convert RUN
--to lda --out NEWRUN`` (docs/train.md, "Converting an HDP run to LDA"): the new run starts
from the HDP's live topics, largest first, keeps their labels, trains, resumes exactly and is
the same every time; RUN is never changed."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.integration._cli import (assert_same_run, fails, model_arrays, ok, snapshot,
                                    write_config)
from topictk.numbering import topic_number


@pytest.fixture(scope="module")
def hdp_run(example_store, tmp_path_factory):
    """A 20-sweep HDP run of the example corpus with a label on its second-largest topic."""
    folder = tmp_path_factory.mktemp("hdp")
    ok("train", "--config", write_config(
        folder, example_store, "h.yaml", output=str(folder / "h"),
        model={"family": "hdp", "topics": None, "alpha": 1.0},
        inference={"iterations": 20, "burn_in": 10, "thin": 10},
        training={"eval_every": 10, "checkpoint_every": 10}), "-q")
    _, arrays = model_arrays(folder / "h")
    second = int(np.argsort(-arrays["nk"], kind="stable")[1])
    ok("labels", folder / "h", "--set", f"{topic_number(second)}=second largest")
    return folder / "h"


def test_converted_run_starts_from_the_live_topics_largest_first(hdp_run, tmp_path):
    """NEWRUN's K is RUN's live K; its topic j is RUN's j-th largest slot (z and every count
    follow), its beta is RUN's and alpha LDA's default (symmetric 0.1); the marker maps each
    new topic to its HDP number, the label follows its topic, and RUN is unchanged."""
    before = snapshot(hdp_run)
    ok("convert", hdp_run, "--to", "lda", "--out", tmp_path / "l",
       "--set", "inference.iterations=5", "-q")
    assert snapshot(hdp_run) == before
    header, old = model_arrays(hdp_run)
    live = np.flatnonzero(old["nk"])
    live = live[np.argsort(-old["nk"][live], kind="stable")]
    new_header, new = model_arrays(tmp_path / "l", "checkpoints/step-00000020.npz")
    assert new_header["family"] == "lda" and new_header["topics"] == live.size
    np.testing.assert_array_equal(new["nk"], old["nk"][live])
    np.testing.assert_array_equal(live[new["z"]], old["z"])
    np.testing.assert_array_equal(new["ndk"], old["ndk"][:, live])
    np.testing.assert_array_equal(new["nkw"], old["nkw"][:, live])
    np.testing.assert_array_equal(new["alpha"], np.full(live.size, 0.1))
    assert new_header["state"]["beta"] == header["state"]["beta"]
    marker = json.loads((tmp_path / "l" / "topictk-run.json").read_text())
    assert marker["converted_from"]["topics"] == [topic_number(k) for k in live]
    assert marker["converted_from"]["step"] == 20
    labels = json.loads(ok("labels", tmp_path / "l", "--format", "json").stdout)
    labelled = [x for x in labels["labels"] if x["label"]]
    assert [(x["topic"], x["label"]) for x in labelled] == [(2, "second largest")]
    assert [m["step"] for m in json.loads("[" + ",".join(
        (tmp_path / "l" / "metrics.jsonl").read_text().splitlines()) + "]")] == [25]


def test_converted_run_resumes_exactly_and_repeats(hdp_run, tmp_path):
    """Converted with 4 steps and resumed to step 30 ends where a run converted with 10 ends
    (every array, stream and metric; the stopped run also evaluated at step 24), and
    converting twice gives the same run, its sample at step 30 too; the converted run
    evaluates."""
    ok("convert", hdp_run, "--out", tmp_path / "a", "--set", "inference.iterations=10", "-q")
    ok("convert", hdp_run, "--out", tmp_path / "b", "--set", "inference.iterations=4", "-q")
    ok("train", "--config", tmp_path / "b" / "config.yaml", "--resume",
       "--set", "inference.iterations=30", "-q")
    assert_same_run(tmp_path / "a", tmp_path / "b", extra_evaluations=True)
    ok("convert", hdp_run, "--out", tmp_path / "c", "--set", "inference.iterations=10", "-q")
    assert_same_run(tmp_path / "a", tmp_path / "c", same_samples=True)
    ok("evaluate", tmp_path / "a")


def test_alpha_auto_starts_from_the_hdp_prior(hdp_run, tmp_path):
    """model.alpha=auto: alpha starts at RUN's alpha_0 pi of the kept topics."""
    ok("convert", hdp_run, "--out", tmp_path / "l", "--set", "model.alpha=auto",
       "--set", "inference.iterations=1", "-q")
    _, old = model_arrays(hdp_run)
    live = np.flatnonzero(old["nk"])
    live = live[np.argsort(-old["nk"][live], kind="stable")]
    _, new = model_arrays(tmp_path / "l", "checkpoints/step-00000020.npz")
    np.testing.assert_array_equal(new["alpha"], old["alpha"][live])


def test_refusals(hdp_run, example_store, tmp_path):
    """A run of another family, a setting the conversion fixes, and an existing --out are
    refused with exit 2, naming what to change; nothing is written."""
    ok("train", "--config", write_config(tmp_path, example_store, "g.yaml",
                                         output=str(tmp_path / "g"),
                                         inference={"iterations": 2, "burn_in": 1}), "-q")
    assert "model.family lda" in fails(2, "convert", tmp_path / "g", "--out", tmp_path / "x")
    assert "model.topics" in fails(2, "convert", hdp_run, "--out", tmp_path / "x",
                                   "--set", "model.topics=3")
    assert not (tmp_path / "x").exists()
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "mine.txt").write_text("keep")
    assert "--force" in fails(2, "convert", hdp_run, "--out", tmp_path / "x")
    assert (tmp_path / "x" / "mine.txt").read_text() == "keep"


def test_force_replaces_a_converted_run_with_its_labels_only(hdp_run, tmp_path):
    """--force replaces a converted run, labels.tsv topictk wrote included; a labels.tsv
    written by hand (without topictk's first line) is the user's and is refused, kept."""
    out = tmp_path / "l"
    ok("convert", hdp_run, "--out", out, "--set", "inference.iterations=1", "-q")
    assert (out / "labels.tsv").is_file()
    ok("convert", hdp_run, "--out", out, "--set", "inference.iterations=2", "--force", "-q")
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 22
    (out / "labels.tsv").write_text("1\tmine\n")
    assert "labels.tsv" in fails(2, "convert", hdp_run, "--out", out, "--force")
    assert (out / "labels.tsv").read_text() == "1\tmine\n"
