"""Experiment configs (topictk/config): every key checked before any work starts, one message
template naming the YAML path, the allowed values and the file, close-match suggestions."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.fixtures import write_token_store
from topictk.config import parse_override
from topictk.errors import ConfigError, UsageError
from topictk.inference.registry import algorithm_names, get_driver, load_config
from topictk.limits import available_cores

ALGORITHMS = ", ".join(algorithm_names())

BASE = {
    "corpus": "store",
    "output": "run",
    "model": {"topics": 4, "alpha": 0.1, "beta": 0.01},
    "inference": {"algorithm": "gibbs", "iterations": 20, "burn_in": 10, "thin": 5},
    "training": {"seed": 1},
}


def _write(tmp_path: Path, data: dict, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _edit(**sections) -> dict:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    for section, changes in sections.items():
        if isinstance(changes, dict):
            data.setdefault(section, {}).update(changes)
        else:
            data[section] = changes
    return data


def _error(tmp_path, data, overrides=(), names_file=True) -> str:
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path, list(overrides))
    assert info.value.exit_code == 2
    message = str(info.value)
    assert "\n" not in message
    if names_file:
        assert str(path) in message, "the message names the file"
    return message


def test_valid_config_resolves_paths_and_defaults(tmp_path):
    config = load_config(_write(tmp_path, BASE))
    assert config.corpus == (tmp_path / "store").resolve()        # relative to the YAML file
    assert config.output == (tmp_path / "run").resolve()
    assert config.model.topics == 4 and config.model.family == "lda"
    assert config.inference.sparse is True and config.inference.chunks is None
    assert config.inference.blocks == "auto" and config.inference.block_sync == "sweep"
    assert config.inference.sampler == "auto"
    # threads: auto is the CPUs this process may use, resolved when the config is loaded
    assert config.training.threads == available_cores() and config.training.keep_checkpoints == 3
    assert config.training.eval_every == 2                      # a tenth of 20 iterations
    assert config.evaluation.curve_fold_in_sweeps == 10
    assert config.evaluation.fold_in_sweeps == 50 and config.evaluation.fold_in_burn_in == 25
    with pytest.raises(AttributeError):
        config.model.nothing
    with pytest.raises(TypeError):
        config.model["topics"] = 5                                  # read-only sections


def test_burn_in_and_thin_default_from_iterations(tmp_path):
    data = _edit(inference={"iterations": 100})
    del data["inference"]["burn_in"], data["inference"]["thin"]
    config = load_config(_write(tmp_path, data))
    assert config.inference.burn_in == 50 and config.inference.thin == 5


def test_unknown_key_names_path_file_and_suggestion(tmp_path):
    message = _error(tmp_path, _edit(model={"topcs": 5}))
    assert "unknown key 'model.topcs'" in message
    assert "did you mean 'topics'?" in message
    assert ("allowed: alpha, beta, family, residual_topic, seed_file, seed_mode, seed_weight, "
            "seed_words, topics") in message


def test_unknown_key_without_a_close_match(tmp_path):
    message = _error(tmp_path, _edit(model={"zzz": 5}))
    assert message == (f"unknown key 'model.zzz' ({tmp_path / 'exp.yaml'}); allowed: alpha, "
                       f"beta, family, residual_topic, seed_file, seed_mode, seed_weight, "
                       f"seed_words, topics")


@pytest.mark.parametrize("value, shown", [(float("inf"), "inf"), (float("-inf"), "-inf"),
                                          (float("nan"), "nan")])
def test_non_finite_numbers_are_refused_as_not_finite(tmp_path, value, shown):
    message = _error(tmp_path, _edit(model={"beta": value}))
    path = tmp_path / "exp.yaml"
    assert message == f"model.beta must be a finite number > 0; got {shown} ({path})"
    # through --set, as YAML spells infinity
    message = _error(tmp_path, _edit(), ["training.time_limit=.inf"], names_file=False)
    assert message.startswith("training.time_limit must be a finite number > 0 or null; got inf")
    assert message.endswith("(--set training.time_limit=.inf)")


def test_unknown_section_with_suggestion(tmp_path):
    message = _error(tmp_path, _edit(trainig={"seed": 3}))
    assert "unknown section 'trainig'" in message and "did you mean 'training'?" in message
    message = _error(tmp_path, _edit(zzz={"a": 1}))
    assert "unknown section 'zzz'" in message
    assert "corpus, evaluation, inference, model, output, training" in message


def test_misspelled_algorithm(tmp_path):
    message = _error(tmp_path, _edit(inference={"algorithm": "gibs"}))
    assert f"inference.algorithm must be one of {ALGORITHMS}; got 'gibs'" in message
    assert "did you mean 'gibbs'?" in message


def test_negative_alpha(tmp_path):
    message = _error(tmp_path, _edit(model={"alpha": -0.5}))
    path = tmp_path / "exp.yaml"
    assert message == f"model.alpha must be a number > 0 or auto; got -0.5 ({path})"
    assert "must be a number > 0" in _error(tmp_path, _edit(model={"alpha": 0}))


@pytest.mark.parametrize("topics", [0, -3, 1_000_001, 3_000_000_000])
def test_topics_out_of_range(tmp_path, topics):
    message = _error(tmp_path, _edit(model={"topics": topics}))
    assert message.startswith(f"model.topics must be an integer in [1, 1000000]; got {topics} (")


@pytest.mark.parametrize("section,key,value,allowed", [
    ("model", "topics", 2.5, "an integer in [1, 1000000]"),
    ("model", "beta", "small", "a number > 0"),
    ("inference", "sparse", "yes please", "true, false or auto"),
    ("training", "threads", 0, "an integer >= 1 or auto"),
    ("training", "time_limit", -1, "a number > 0 or null"),
    ("evaluation", "coherence_top", 1, "an integer >= 2"),
    ("inference", "iterations", True, "an integer >= 1"),
])
def test_out_of_range_values_name_the_allowed_range(tmp_path, section, key, value, allowed):
    message = _error(tmp_path, _edit(**{section: {key: value}}))
    assert message.startswith(f"{section}.{key} must be {allowed}; got {value!r} (")


def test_missing_required_keys(tmp_path):
    data = _edit()
    del data["model"]["topics"]
    assert "model.topics is required: an integer in [1, 1000000]" in _error(tmp_path, data)
    data = _edit()
    del data["inference"]["algorithm"]
    assert f"inference.algorithm is required: one of {ALGORITHMS}" in _error(tmp_path, data)
    data = _edit()
    del data["corpus"]
    assert "corpus is required: a path" in _error(tmp_path, data)


def test_burn_in_must_be_below_iterations(tmp_path):
    message = _error(tmp_path, _edit(inference={"burn_in": 20}))
    assert "inference.burn_in must be < inference.iterations (20); got 20" in message
    message = _error(tmp_path, _edit(evaluation={"fold_in_sweeps": 10, "fold_in_burn_in": 10}))
    assert "evaluation.fold_in_burn_in must be < evaluation.fold_in_sweeps (10); got 10" in message


def test_bad_yaml_and_missing_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("model: {topics: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="broken.yaml: line \\d+ invalid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="nope.yaml: config file not found"):
        load_config(tmp_path / "nope.yaml")
    (tmp_path / "empty.yaml").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="empty.yaml: config file is empty"):
        load_config(tmp_path / "empty.yaml")


# --------------------------------------------------------------------------- --set
def test_set_overrides_are_typed(tmp_path):
    path = _write(tmp_path, BASE)
    config = load_config(path, ["model.topics=7", "model.alpha=0.25", "model.beta=1e-3",
                                "inference.sparse=false", "training.time_limit=2.5",
                                "training.seed=42", "model.alpha=auto"])
    assert config.model.topics == 7 and isinstance(config.model.topics, int)
    assert config.model.alpha == "auto"                     # the last --set of a key wins
    assert config.model.beta == 0.001 and isinstance(config.model.beta, float)
    assert config.inference.sparse is False
    assert config.training.time_limit == 2.5 and config.training.seed == 42
    config = load_config(path, ["training.time_limit=null", "output=elsewhere"])
    assert config.training.time_limit is None
    assert config.output == (tmp_path / "elsewhere").resolve()


def test_numbers_in_exponent_notation_are_numbers(tmp_path):
    """YAML 1.1 (PyYAML) reads 1e-3 as a string; topictk reads it as the number users mean."""
    path = tmp_path / "e.yaml"
    path.write_text("corpus: store\noutput: run\nmodel: {topics: 2, beta: 1e-3, alpha: 5E-2}\n"
                    "inference: {algorithm: gibbs, iterations: 1e2}\n", encoding="utf-8")
    config = load_config(path)
    assert config.model.beta == 0.001 and config.model.alpha == 0.05
    assert config.inference.iterations == 100 and isinstance(config.inference.iterations, int)


def test_set_can_add_a_section_absent_from_the_file(tmp_path):
    data = _edit()
    del data["training"]
    config = load_config(_write(tmp_path, data), ["evaluation.chunk_docs=4"])
    assert config.evaluation.chunk_docs == 4 and config.training.seed == 0


def test_set_unknown_key(tmp_path):
    message = _error(tmp_path, BASE, ["inference.iteration=5"], names_file=False)
    assert "unknown key 'inference.iteration' (--set inference.iteration=5)" in message
    assert "did you mean 'iterations'?" in message


@pytest.mark.parametrize("text", ["model.topics", "=3", "model..topics=3", ""])
def test_set_syntax_errors(text):
    with pytest.raises(ConfigError, match="--set expects section.key=value"):
        parse_override(text)


def test_set_into_a_value_is_refused(tmp_path):
    message = _error(tmp_path, BASE, ["corpus.path=x"], names_file=False)
    assert "'corpus' is a value, not a section; use --set corpus=PATH" in message


def test_config_errors_are_usage_errors():
    assert issubclass(ConfigError, UsageError)


# -------------------------------------------------------- resolved config in the run
def test_resolved_config_is_written_to_the_run_directory(tmp_path):
    from topictk.training.run import train

    rng = np.random.default_rng(0)
    write_token_store(tmp_path / "store", [rng.integers(0, 8, 12) for _ in range(6)], 8)
    data = _edit(inference={"iterations": 4, "burn_in": None, "thin": None},
                 training={"eval_every": 2, "checkpoint_every": 0})
    del data["inference"]["burn_in"], data["inference"]["thin"]
    path = _write(tmp_path, data)
    config = load_config(path, ["model.topics=3"])
    train(config, quiet=True)
    written = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text(encoding="utf-8"))
    assert written == {**config.to_dict(), "output": "."}  # the run is where the file is
    assert written["model"]["topics"] == 3                 # the override, not the file's 4
    assert written["inference"]["burn_in"] == 2 and written["inference"]["thin"] == 1
    assert written["corpus"] == str((tmp_path / "store").resolve())
    assert written["evaluation"]["fold_in_sweeps"] == 50   # defaults are spelled out
    # the resolved file is itself a valid config that resolves to the same values
    assert load_config(tmp_path / "run" / "config.yaml").to_dict() == config.to_dict()


def test_every_algorithm_name_resolves_to_its_driver():
    """The registry imports a driver module only when its algorithm is asked for; every name
    it lists must resolve to a driver of that name."""
    from topictk.inference.registry import ALGORITHMS, algorithm_names, get_driver

    assert algorithm_names() == sorted(ALGORITHMS)
    for name in ALGORITHMS:
        assert get_driver(name).name == name


@pytest.mark.parametrize("model, inference, expected", [
    ({"family": "dmr"}, {"algorithm": "gibbs", "sigma2": 0.5},
     ("inference.algorithm 'gibbs' trains model.family lda, the config says dmr; use one of "
      "dmr-sem, dmr-sgrld or set model.family: lda")),
    ({"family": "lda"}, {"algorithm": "dmr-sem", "sigma2": 0.5},
     (f"inference.algorithm 'dmr-sem' trains model.family dmr, the config says lda; use one "
      f"of {', '.join(n for n in algorithm_names() if get_driver(n).traits.family == 'lda')} "
      f"or set model.family: dmr")),
    ({"family": "lda", "layers": [4, 2]}, {"algorithm": "tlasgr"},
     "inference.algorithm 'tlasgr' trains deep LDA: set model.family: dlda and model.layers"),
])
def test_family_mismatch_is_reported_before_the_keys_of_either_family(tmp_path, model,
                                                                      inference, expected):
    """The keys of the intended family (inference.sigma2, model.layers) are not reported as
    unknown: the algorithm that does not train model.family is."""
    data = _edit(model=model, inference={"iterations": 20, **inference})
    for key in ("burn_in", "thin"):
        data["inference"].pop(key)
    message = _error(tmp_path, data)
    assert message.startswith(expected), message
    assert "unknown key" not in message


def test_model_family_must_match_the_algorithm(tmp_path):
    """model.family: dmr with an LDA algorithm would silently train plain LDA: refused."""
    from topictk.errors import ConfigError
    from topictk.inference.registry import load_config

    raw = {"corpus": "c", "output": "o", "model": {"family": "dmr", "topics": 3},
           "inference": {"algorithm": "gibbs", "iterations": 10}}
    with pytest.raises(ConfigError, match=r"'gibbs' trains model.family lda, the config says dmr; "
                                          r"use one of dmr-sem, dmr-sgrld"):
        load_config(None, raw=raw)
