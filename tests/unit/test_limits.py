"""Bounded resources and numbers read as people mean them: thread counts capped, YAML aliases
and JSON nesting bounded, long values cut in messages, dense arrays checked against the memory
available, and configs that read ``010`` as 10, never as octal 8."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.fixtures import write_token_store
from topictk import limits
from topictk.config import parse_override
from topictk.config.loader import MAX_CONFIG_NODES, dense_arrays
from topictk.errors import ConfigError
from topictk.inference.registry import load_config

BASE = {
    "corpus": "store",
    "output": "run",
    "model": {"topics": 4},
    "inference": {"algorithm": "gibbs", "iterations": 20, "burn_in": 10, "thin": 5},
}


def _config(tmp_path: Path, text: str | None = None, overrides=()):
    path = tmp_path / "exp.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(BASE), encoding="utf-8")
    return load_config(path, list(overrides))


def _refused(tmp_path: Path, text: str | None = None, overrides=()) -> str:
    with pytest.raises(ConfigError) as info:
        _config(tmp_path, text, overrides)
    message = str(info.value)
    assert "\n" not in message and len(message) < 600, message
    return message


# ---------------------------------------------------------------- numbers

@pytest.mark.parametrize("written, read", [("010", 10), ("0010", 10), ("1_000", 1000),
                                           ("+7", 7), ("12", 12)])
def test_integers_are_decimal_in_the_file_and_in_set(tmp_path, written, read):
    text = yaml.safe_dump(BASE).replace("topics: 4", f"topics: {written}")
    assert _config(tmp_path, text).model.topics == read
    assert _config(tmp_path, overrides=[f"model.topics={written}"]).model.topics == read


@pytest.mark.parametrize("written, hint", [
    ("0x10", "hex, octal and binary"), ("0o10", "hex, octal and binary"),
    ("0b101", "hex, octal and binary"), ("1:00", "h:m:s"), ("1:30:00", "h:m:s")])
def test_hex_octal_and_sexagesimal_numbers_are_refused(tmp_path, written, hint):
    message = _refused(tmp_path, overrides=[f"model.topics={written}"])
    assert message.startswith(f"model.topics must be an integer in [1, 1000000]; got "
                              f"'{written}'")
    assert hint in message and f"(--set model.topics={written})" in message
    text = yaml.safe_dump(BASE).replace("topics: 4", f"topics: {written}")
    assert hint in _refused(tmp_path, text)


def test_floats_keep_their_forms_but_not_sexagesimal(tmp_path):
    for written, read in (("1e-3", 1e-3), ("1.5e-3", 1.5e-3), (".5", 0.5), ("2.", 2.0),
                          ("1E2", 100.0)):
        assert _config(tmp_path, overrides=[f"model.beta={written}"]).model.beta == read
    assert "h:m:s" in _refused(tmp_path, overrides=["model.beta=1:30.5"])
    assert "finite" in _refused(tmp_path, overrides=["model.beta=.inf"])


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "Yes", "OFF"])
def test_yes_no_on_off_are_not_booleans(tmp_path, word):
    message = _refused(tmp_path, overrides=[f"inference.sparse={word}"])
    assert f"got '{word}' (write true or false)" in message
    assert parse_override(f"output={word}")[1] == word      # a string key keeps the word


def test_true_and_false_are_booleans(tmp_path):
    assert _config(tmp_path, overrides=["inference.sparse=false"]).inference.sparse is False
    assert _config(tmp_path, overrides=["inference.sparse=True"]).inference.sparse is True


def test_paths_are_taken_as_written(tmp_path):
    # found by tests/properties: --set output=010 was the integer 10, refused as "required"
    assert _config(tmp_path, overrides=["output=010"]).output.name == "010"
    assert _config(tmp_path, overrides=["output=2024"]).output.name == "2024"
    text = yaml.safe_dump(BASE).replace("output: run", "output: 2024")
    assert "output must be a path; got 2024, which YAML reads as a number: put the path in " \
           "quotes" in _refused(tmp_path, text)


def test_a_path_with_a_nul_character_is_refused(tmp_path):
    # found by tests/properties: a ValueError from pathlib
    text = yaml.safe_dump(BASE).replace("corpus: store", 'corpus: "st\\0re"')
    assert "corpus must be a path; got 'st\\x00re', which holds a NUL character" in \
        _refused(tmp_path, text)


def test_a_family_that_is_a_list_is_refused(tmp_path):
    # found by tests/properties: a TypeError (unhashable list) from the family lookup
    message = _refused(tmp_path, overrides=["model.family=[1]"])
    assert message.startswith("model.family must be one of lda, dmr, dlda, keyatm, hdp, dtm; "
                              "got [1]")


def test_dates_stay_strings():
    assert parse_override("output=2024-01-01")[1] == "2024-01-01"


def test_a_value_against_its_explicit_tag_is_one_message(tmp_path):
    text = yaml.safe_dump(BASE).replace("topics: 4", "topics: !!float abc")
    assert "invalid YAML" in _refused(tmp_path, text)
    text = yaml.safe_dump(BASE).replace("topics: 4", "topics: !!int 0x10")
    assert "not a decimal integer" in _refused(tmp_path, text)


# ---------------------------------------------------------------- YAML aliases

def _laughs(levels: int, key: str = "corpus") -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]")
    lines.append(f"{key}: *l{levels - 1}")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_at_once(tmp_path):
    began = time.perf_counter()
    message = _refused(tmp_path, _laughs(9))
    assert time.perf_counter() - began < 5
    assert f"expand to more than {MAX_CONFIG_NODES:,} values" in message
    assert message.startswith(f"{tmp_path / 'exp.yaml'}: line ")


def test_a_small_alias_expansion_is_echoed_cut_short(tmp_path):
    # 10^4 values are allowed, and quoting the value in the message stays short
    message = _refused(tmp_path, yaml.safe_dump(BASE) + _laughs(4, "evaluation"))
    assert "unknown section 'l0'" in message


def test_aliases_that_contain_themselves_are_refused(tmp_path):
    assert "refers to the node that contains it" in _refused(tmp_path, "a: &a [1, *a]\n")
    assert "refers to the node that contains it" in _refused(tmp_path, "a: &a {b: *a}\n")


def test_ordinary_aliases_still_work(tmp_path):
    text = yaml.safe_dump(BASE) + "training: {seed: &s 3, eval_every: *s}\n"
    config = _config(tmp_path, text)
    assert config.training.seed == 3 and config.training.eval_every == 3


def test_a_control_character_in_the_yaml_is_one_line(tmp_path):
    # found by tests/properties: PyYAML's reader error spans two lines
    message = _refused(tmp_path, "\x00" + yaml.safe_dump(BASE))
    assert "invalid YAML (unacceptable character #x0000: special characters are not allowed " \
           "in " in message


def test_deeply_nested_yaml_is_one_message(tmp_path):
    assert "invalid YAML" in _refused(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n")


def test_long_values_are_cut_in_messages(tmp_path):
    message = _refused(tmp_path, overrides=["model.topics=" + "x" * 100_000])
    assert "got 'xxxxxxxxxxxxxxxxxxxxxxxxxxx...xxxxxxxxxxxxxxxxxxxxxxxxxxxx' (" in message
    message = _refused(tmp_path, overrides=["model.topics=[" + ", ".join(["1"] * 10_000) + "]"])
    assert "got [1, 1, 1, 1, 1, 1, ...]" in message


def test_short_is_bounded_for_huge_and_nested_values():
    big = [list(range(10))] * 10**6
    text = limits.short(big)
    assert len(text) <= 80
    assert limits.short("a" * 10_000, 20) == "'aaaaaaaaaaaaaaaa..."


# ---------------------------------------------------------------- threads

def test_thread_counts_are_capped_with_one_line(tmp_path, caplog):
    cap = limits.max_threads()
    assert cap >= limits.MIN_THREAD_CAP
    with caplog.at_level(logging.WARNING, logger="topictk"):
        config = _config(tmp_path, overrides=["training.threads=100000"])
    assert config.training.threads == cap
    lines = [r.getMessage() for r in caplog.records]
    expected = (f"training.threads = 100000 is more than this machine can use "
                f"({limits.cores()} cores x 4); using {cap} threads")
    assert lines == [expected]
    assert _config(tmp_path, overrides=["training.threads=1e9"]).training.threads == cap
    assert _config(tmp_path, overrides=["training.threads=2"]).training.threads == 2


def test_threads_auto_is_the_cpus_the_process_may_use(tmp_path, monkeypatch):
    """``training.threads: auto`` (the default) is the affinity mask's CPUs, fewer under a
    cgroup v2 quota (rounded up), resolved when the config is loaded."""
    monkeypatch.setattr(limits, "cores", lambda: 6)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert limits.cpu_quota(str(tmp_path)) is None
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert limits.cpu_quota(str(tmp_path)) == 3
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert limits.cpu_quota(str(tmp_path)) == 1
    assert limits.cpu_quota(str(tmp_path / "absent")) is None
    monkeypatch.setattr(limits, "cpu_quota", lambda: 3)
    assert limits.available_cores() == 3
    monkeypatch.setattr(limits, "cpu_quota", lambda: 16)
    assert limits.available_cores() == 6
    monkeypatch.setattr(limits, "cpu_quota", lambda: None)
    assert limits.available_cores() == 6
    assert _config(tmp_path).training.threads == 6
    assert _config(tmp_path, overrides=["training.threads=2"]).training.threads == 2


def test_cap_threads_leaves_sane_counts_alone(monkeypatch):
    monkeypatch.setattr(limits, "cores", lambda: 2)
    assert limits.max_threads() == 8
    assert limits.cap_threads(8, "x") == 8
    assert limits.cap_threads(9, "x") == 8
    monkeypatch.setattr(limits, "cores", lambda: 16)
    assert limits.cap_threads(64, "x") == 64


# ---------------------------------------------------------------- JSON nesting

def test_json_nesting_is_bounded():
    assert limits.json_loads('{"a": [[1]]}') == {"a": [[1]]}
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(json.JSONDecodeError, match="nested more than 64 levels"):
        limits.json_loads(deep)
    # brackets inside strings do not count
    assert limits.json_loads(json.dumps({"t": "[" * 1000})) == {"t": "[" * 1000}
    assert limits.json_loads(json.dumps({"t": '\\"' + "{" * 100})) == {"t": '\\"' + "{" * 100}
    # many brackets side by side are not deep
    flat = "[" + ",".join(["[]"] * 1000) + "]"
    assert len(limits.json_loads(flat)) == 1000


# ---------------------------------------------------------------- memory

def _store(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    train = [rng.integers(0, 50, size=20) for _ in range(30)]
    write_token_store(tmp_path / "store", train, 50, test_observed=train[:5],
                      test_heldout=train[5:10])
    return tmp_path / "store"


def test_dense_arrays_of_flat_and_deep_models():
    counts = {"vocabulary": 1000, "train_documents": 500, "test_documents": 50}
    expected = [("topic-word", (20, 1000), 8), ("document-topic", (500, 20), 8),
                ("test document-topic", (50, 20), 8)]
    assert dense_arrays({"topics": 20}, counts) == expected
    deep = dense_arrays({"topics": 8, "layers": [8, 4]}, counts)
    assert ("topic-topic", (4, 8), 8) in deep and ("document-topic", (500, 12), 8) in deep
    assert limits.dense_bytes(deep) == 8 * (8 * 1000 + 4 * 8 + 500 * 12 + 50 * 12)


def test_a_model_larger_than_memory_is_refused_with_its_estimate(tmp_path, monkeypatch):
    _store(tmp_path)
    monkeypatch.setattr(limits, "available_memory", lambda: 2**28)
    assert _config(tmp_path, overrides=["model.topics=1000"]).model.topics == 1000
    # the default sampler at this K is WarpLDA's (auto), whose counts fit
    assert _config(tmp_path, overrides=["model.topics=1000000"]).model.topics == 1000000
    message = _refused(tmp_path, overrides=["model.topics=1000000", "inference.sampler=sparse"])
    assert message.startswith(
        "model.topics = 1000000 needs about 1.5 GiB of memory (phi-hat 2 x 50 x 1,000,000 x "
        "8 B = 763 MiB, phi-hat of the curve's words 50 x 1,000,000 x 8 B = 381 MiB, "
        "topic-word counts 50 x 1,000,000 x 4 B = 191 MiB, 4 smaller), more than the 256 MiB "
        "allowed (the memory available); lower model.topics, choose inference.sampler: warp")


def test_no_memory_check_without_a_store_or_a_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "available_memory", lambda: 1)
    assert _config(tmp_path).model.topics == 4           # no store yet: opening it says so
    _store(tmp_path)
    monkeypatch.setattr(limits, "available_memory", lambda: None)
    assert _config(tmp_path, overrides=["model.topics=1000000"]).model.topics == 1000000


def test_available_memory_reads_the_system():
    available = limits.available_memory()
    assert available is None or available > 2**20
