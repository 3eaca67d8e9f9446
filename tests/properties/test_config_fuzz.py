"""The config loader and the ``--set`` parser on generated and damaged configs: a config either
loads or is refused with a ConfigError (one line), never another exception; a resolved config
written as the run's config.yaml reads back to the same config."""
from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from hypothesis import strategies as st

from tests.properties._props import damaged, quick_and_long
from topictk.config import parse_override
from topictk.errors import TopictkError
from topictk.inference.registry import load_config

BASE = {
    "corpus": "store",
    "output": "run",
    "model": {"topics": 4, "alpha": 0.1, "beta": 0.01},
    "inference": {"algorithm": "gibbs", "iterations": 20, "burn_in": 10, "thin": 5},
    "training": {"seed": 1, "threads": 1},
    "evaluation": {"fold_in_sweeps": 10, "fold_in_burn_in": 5},
}
BASE_TEXT = yaml.safe_dump(BASE, sort_keys=False).encode()

KEYS = ["model.topics", "model.alpha", "model.beta", "model.family", "model.layers",
        "inference.algorithm", "inference.iterations", "inference.burn_in", "inference.thin",
        "inference.sparse", "inference.chunks", "inference.step.a", "training.seed",
        "training.threads", "training.time_limit", "training.eval_every",
        "evaluation.fold_in_sweeps", "corpus", "output", "model", "nosuch.key", "model.topix"]

# YAML-ish values: numbers in every form YAML 1.1 knows, booleans, aliases, flow collections
_SCALAR_TEXT = st.one_of(
    st.sampled_from(["010", "0x10", "0o17", "0b11", "1:00", "1_000", "1e3", "1e-3", ".5",
                     "-.inf", ".nan", "yes", "no", "on", "off", "true", "null", "~", "",
                     "auto", "2024-01-01", "[1, 2]", "{a: 1}", "&a 1", "*a", "!!float x",
                     "!!int 0x1", "!!binary x", "'quoted'", '"x\\u0000"', "- 1", "?", "|",
                     "[[[[[[", "1e400", "9" * 40, "vb", "gibbs", "dlda", "tlasgr"]),
    st.text(alphabet="0123456789.:-+eExXoObB_ytrfnu[]{},&*!'\" ", max_size=12))

OVERRIDE = st.one_of(st.tuples(st.sampled_from(KEYS), _SCALAR_TEXT).map(lambda kv: "=".join(kv)),
                     st.text(max_size=20))


@st.composite
def config_text(draw) -> bytes:
    kind = draw(st.sampled_from(["edit", "edit", "damage", "random"]))
    if kind == "random":
        return draw(st.binary(max_size=80))
    if kind == "damage":
        return draw(damaged(BASE_TEXT))
    lines = BASE_TEXT.decode().splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        head = lines[i].split(":", 1)[0]
        lines[i] = f"{head}: {draw(_SCALAR_TEXT)}"
    return ("\n".join(lines) + "\n").encode()


CONFIG_INPUT = st.tuples(config_text(), st.lists(OVERRIDE, max_size=3))


def check_config(example) -> None:
    text, overrides = example
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "exp.yaml"
        path.write_bytes(text)
        try:
            config = load_config(path, overrides)
        except TopictkError as exc:
            message = str(exc)
            assert "\n" not in message and len(message) < 2000, message
            return
        # what the run directory keeps reads back to the same config
        saved = Path(tmp) / "config.yaml"
        saved.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
        assert load_config(saved).to_dict() == config.to_dict()


test_config_loader, test_config_loader_long = quick_and_long(check_config, CONFIG_INPUT)


def check_override(text: str) -> None:
    try:
        parts, _ = parse_override(text)
    except TopictkError as exc:
        assert "\n" not in str(exc)
        return
    assert parts and all(parts)


test_set_parser, test_set_parser_long = quick_and_long(
    check_override, st.one_of(OVERRIDE, st.text(max_size=40)))


@st.composite
def valid_values(draw):
    """Values every key accepts, in every way they can be written."""
    topics = draw(st.integers(1, 500))
    iterations = draw(st.integers(2, 10**6))
    burn_in = draw(st.integers(0, iterations - 1))
    return {
        "model.topics": draw(st.sampled_from([str(topics), f"{topics:04d}", f"{topics}.0",
                                              f"+{topics}"])),
        "inference.iterations": str(iterations),
        "inference.burn_in": str(burn_in),
        "inference.thin": str(draw(st.integers(1, 50))),
        "model.beta": draw(st.sampled_from(["1e-3", "0.5", ".25", "2", "1.5e+2"])),
        "training.seed": f"{draw(st.integers(0, 10**30)):_}",
        "output": draw(st.sampled_from(["yes", "010", "1:00", "0x10", "true", "2024-01-01",
                                        "1e3", "null-ish", "run"])),
    }, topics, iterations, burn_in


def check_values(example) -> None:
    values, topics, iterations, burn_in = example
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "exp.yaml"
        path.write_bytes(BASE_TEXT)
        config = load_config(path, [f"{k}={v}" for k, v in values.items()])
        assert config.model.topics == topics
        assert config.inference.iterations == iterations
        assert config.inference.burn_in == burn_in
        assert config.training.seed == int(values["training.seed"].replace("_", ""))
        assert config.output.name == values["output"]
        saved = Path(tmp) / "config.yaml"
        saved.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
        assert load_config(saved).to_dict() == config.to_dict()


test_numbers_as_written, test_numbers_as_written_long = quick_and_long(check_values,
                                                                       valid_values())
