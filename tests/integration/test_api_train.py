"""``topictk.train`` and ``Run.resume``: the engine of ``topictk train`` from Python. Runs
trained by the API equal the command's bit for bit; the notebook walkthrough of
docs/python.md runs; callbacks see every evaluation and stop a run with a checkpoint;
Ctrl-C stops after the step and raises KeyboardInterrupt; errors are topictk's exceptions."""
from __future__ import annotations

import json
import os
import re
import signal

import numpy as np
import pytest
import yaml

import topictk
from tests.golden.cases import CASES, PINNED
from tests.integration._cli import (
    EXAMPLE,
    REPO,
    assert_same_arrays,
    assert_same_run,
    fails,
    model_arrays,
    ok,
    samples,
    write_config,
)
from topictk.errors import ConfigError, TopictkError, UsageError

CLOCK = ("train_seconds", "eval_seconds")


def _small(tmp_path, store, **sections) -> dict:
    """A short collapsed-Gibbs experiment on ``store`` as a dict (write_config's)."""
    return yaml.safe_load(write_config(tmp_path, store, **sections).read_text())


def _metrics_without_clock(run) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in CLOCK}
            for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]


def assert_runs_identical(a, b) -> None:
    """The model's arrays and header (less the clock), every saved sample, the metrics less
    their clock fields and the resolved config: bit for bit."""
    header_a, arrays_a = model_arrays(a)
    header_b, arrays_b = model_arrays(b)
    assert_same_arrays(arrays_a, arrays_b)
    header_a.pop("clock")
    header_b.pop("clock")
    assert header_a == header_b
    sa, sb = samples(a), samples(b)
    assert list(sa) == list(sb)
    for name in sa:
        assert_same_arrays(sa[name], sb[name])
    assert _metrics_without_clock(a) == _metrics_without_clock(b)
    assert (a / "config.yaml").read_text() == (b / "config.yaml").read_text()


@pytest.mark.parametrize("case", ["gibbs", "ovb", "dmr-sem"])
def test_api_and_command_train_the_same_run(case, tmp_path, example_store, meta_store):
    """The example config of each family, shortened as the golden cases shorten it, trained
    by ``topictk train --config FILE --set ...`` and by ``topictk.train(dict, overrides=...)``."""
    _, config, overrides = next(c for c in CASES if c[0] == case)
    store = meta_store if config.startswith("example_dmr") else example_store
    sets = [*PINNED, *overrides]
    args = ["train", "--config", REPO / "configs" / config, "--out", tmp_path / "cli",
            "--set", f"corpus={store}", "-q"]
    for s in sets:
        args += ["--set", s]
    ok(*args)
    data = yaml.safe_load((REPO / "configs" / config).read_text(encoding="utf-8"))
    run = topictk.train(data, store=store, out=tmp_path / "api", overrides=sets,
                        progress=False)
    assert run.path == tmp_path / "api" and run.step == run.config.inference.iterations
    assert_runs_identical(tmp_path / "cli", tmp_path / "api")
    if case != "ovb":
        assert samples(tmp_path / "api")          # the samples were compared, not absent


def _walkthrough() -> str:
    """The code block of docs/python.md's notebook session."""
    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    section = text[text.index("## A notebook session"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_notebook_walkthrough_runs(tmp_path, monkeypatch, capsys):
    """docs/python.md's session, run from a folder that holds the example corpus: a store
    from a DataFrame, a dict config trained with a callback, topics, infer, resume; the
    resumed run is the run trained to the new total at once by the command."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(_walkthrough(), "docs/python.md", "exec"), names)
    run, history = names["run"], names["history"]
    # the DataFrame's store is the store of the text file
    ok("prepare", EXAMPLE, "--out", tmp_path / "from-file")
    assert (topictk.open_store("stores/python").corpus_id
            == topictk.open_store(tmp_path / "from-file").corpus_id)
    # the callback saw the first training's evaluations, as metrics.jsonl held them then
    assert [r["step"] for r in history] == [20, 40, 60, 80, 100]
    assert history == [r for r in run.metrics() if r["step"] <= 100]
    assert run.step == 150 and run.status == "completed"
    theta = names["theta"]
    assert theta.shape == (2, 10) and np.allclose(theta.sum(axis=1), 1)
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == "307 training documents, 1737 words"
    assert [line.split()[0] for line in shown[2:12]] == [str(k) for k in range(1, 11)]
    # the same config trained to 150 sweeps at once by the command
    config = dict(names["config"], corpus=str(tmp_path / "stores" / "python"),
                  output=str(tmp_path / "at-once"))
    config["inference"] = dict(config["inference"], iterations=150)
    (tmp_path / "at-once.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    ok("train", "--config", tmp_path / "at-once.yaml", "-q")
    assert_same_run(tmp_path / "at-once", run.path, same_samples=True)


def test_callback_sees_every_evaluation(tmp_path, example_store):
    seen = []
    run = topictk.train(_small(tmp_path, example_store), callback=seen.append, progress=False)
    lines = (run.path / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(seen) == len(lines) == 4
    assert seen == [json.loads(line) for line in lines]
    more = []
    resumed = run.resume(iterations=60, callback=more.append, progress=False)
    assert [r["step"] for r in more] == [50, 60] and resumed.step == 60


def test_a_callback_that_raises_stops_with_a_checkpoint(tmp_path, example_store):
    """The exception comes out of train after the checkpoint of its step; resuming gives
    the run trained without stopping."""
    config = _small(tmp_path, example_store)

    def stop_at_20(record):
        if record["step"] == 20:
            raise ValueError("perplexity is good enough")

    with pytest.raises(ValueError, match="good enough"):
        topictk.train(config, out=tmp_path / "stopped", callback=stop_at_20, progress=False)
    assert sorted(p.name for p in (tmp_path / "stopped" / "checkpoints").iterdir()) == [
        "step-00000020.npz"]
    assert not (tmp_path / "stopped" / "model.npz").exists()
    checkpoint = topictk.load_run(tmp_path / "stopped", checkpoint=20)
    assert checkpoint.status == "interrupted"
    resumed = checkpoint.resume(progress=False)
    straight = topictk.train(config, out=tmp_path / "straight", progress=False)
    assert resumed.step == straight.step == 40
    assert_same_run(straight.path, resumed.path, same_samples=True)


def test_ctrl_c_stops_after_the_step_and_raises_keyboard_interrupt(tmp_path, example_store):
    config = _small(tmp_path, example_store)
    before = signal.getsignal(signal.SIGINT)

    def interrupt_at_10(record):
        if record["step"] == 10:
            os.kill(os.getpid(), signal.SIGINT)     # as a notebook's "interrupt the kernel"

    with pytest.raises(KeyboardInterrupt, match=r"stopped at step 10, checkpoint written"):
        topictk.train(config, out=tmp_path / "stopped", callback=interrupt_at_10,
                      progress=False)
    assert signal.getsignal(signal.SIGINT) is before      # the handler found is back
    assert (tmp_path / "stopped" / "checkpoints" / "step-00000010.npz").exists()
    resumed = topictk.train(config, out=tmp_path / "stopped", resume=True, progress=False)
    straight = topictk.train(config, out=tmp_path / "straight", progress=False)
    assert_same_run(straight.path, resumed.path, same_samples=True)


def test_progress_false_prints_nothing(tmp_path, example_store, capfd):
    topictk.train(_small(tmp_path, example_store), progress=False)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_progress_in_a_notebook_is_a_bar(tmp_path, example_store, monkeypatch, capsys):
    """A notebook's stderr is no terminal: its bar is tqdm.auto's (the widget in a kernel;
    here, without one, tqdm's text bar on stderr), not the log lines of a run logging to a
    file; progress=False opens none."""
    import tqdm.auto

    from topictk import progress
    from topictk.training import progress as training_progress

    opened = []

    class Recording(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            opened.append((kwargs.get("total"), kwargs.get("unit")))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(training_progress, "in_notebook", lambda: True)
    topictk.train(_small(tmp_path, example_store), progress=True)
    assert opened == [(40, "step")]
    assert "0/40" in capsys.readouterr().err
    topictk.train(_small(tmp_path, example_store), progress=False, force=True)
    assert opened == [(40, "step")] and capsys.readouterr().err == ""


def test_a_dict_with_an_unknown_key_fails_with_the_loaders_message(tmp_path, example_store):
    config = _small(tmp_path, example_store)
    config["model"]["topcs"] = 5
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    from_cli = fails(2, "train", "--config", path)
    with pytest.raises(ConfigError) as caught:
        topictk.train(config)
    message = str(caught.value)
    assert message == from_cli.replace(str(path), "<config>")
    assert "model.topcs" in message and "did you mean 'topics'" in message
    assert "\n" not in message and not (tmp_path / "run").exists()


def test_keyword_errors_name_the_keyword(tmp_path, example_store):
    config = _small(tmp_path, example_store)
    with pytest.raises(ConfigError, match=r"threads=0"):
        topictk.train(config, threads=0)
    with pytest.raises(UsageError, match=r"config is a YAML file or a mapping"):
        topictk.train(3)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(TopictkError) as caught:       # not SystemExit
        topictk.train(config, out=tmp_path / "taken", force=True)
    assert "taken" in str(caught.value)
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"


def test_paths_of_a_dict_are_relative_to_the_working_directory(tmp_path, example_store,
                                                                monkeypatch):
    """As a config read from standard input: corpus and output of a dict, and store= and
    out=, are relative to the working directory; store= takes an open store too."""
    monkeypatch.chdir(tmp_path)
    config = _small(tmp_path, example_store)
    config["output"] = "runs/relative"
    run = topictk.train(config, store=topictk.open_store(example_store), progress=False,
                        overrides=["inference.iterations=20", "inference.burn_in=10"])
    assert run.path == tmp_path / "runs" / "relative" and run.step == 20
    # a run's own config.yaml trains that run where it is: here, resumed further
    again = topictk.train(run.path / "config.yaml", resume=True, progress=False,
                          overrides="inference.iterations=30")
    assert again.path == run.path and again.step == 30


def test_train_is_exported_lazily():
    assert "train" in topictk.__all__ and topictk.train is topictk.api.train


def test_infer_takes_a_data_frame_as_prepare_does(tmp_path, meta_store):
    """A DMR run (its prior depends on each document's metadata): the rows of a DataFrame,
    its text in a column of another name, give the proportions of the same documents as
    mappings; and the metadata counts (other values give other proportions)."""
    import pandas as pd

    from tests.golden.cases import write_meta_corpus

    _, config, overrides = next(c for c in CASES if c[0] == "dmr-sem")
    data = yaml.safe_load((REPO / "configs" / config).read_text(encoding="utf-8"))
    run = topictk.train(data, store=meta_store, out=tmp_path / "dmr",
                        overrides=[*PINNED, *overrides], progress=False)
    lines = write_meta_corpus(tmp_path / "meta.jsonl").read_text().splitlines()[:12]
    records = [json.loads(line) for line in lines]
    frame = pd.DataFrame(records).rename(columns={"text": "body"})
    from_records = run.infer(records, sweeps=12, burn_in=4)
    from_frame = run.infer(frame, sweeps=12, burn_in=4, text_column="body")
    assert from_records.shape == (12, 8)
    assert np.array_equal(from_records, from_frame)
    frame["group"] = "b"
    assert not np.array_equal(from_records, run.infer(frame, sweeps=12, burn_in=4,
                                                       text_column="body"))
