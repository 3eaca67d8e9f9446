"""``topictk train --sweep KEY=V1,V2,...``: one run per setting of the cartesian product of the
swept values, each into a folder of the output named by its setting.

Every setting's config is validated before any run is trained, so a key that does not exist or
a value a key refuses stops the sweep at once, with the key's allowed values.

Folder names: ``KEY=VALUE`` pairs joined by ``,`` in the order the ``--sweep`` options are
given (``model.topics=50,inference.algorithm=ovb``). Letters, digits and ``. _ - +`` are kept;
every other character of a value (``/ \\ : * ? " < > | , =``, spaces, brackets, non-ASCII) is
written as ``%XX`` (its UTF-8 bytes in hexadecimal), as is a value's trailing dot, so that a
name is valid and means the same on Linux, macOS and Windows file systems; two settings whose
names differ only in case (which case-insensitive file systems do not tell apart) are refused.
"""
from __future__ import annotations

import itertools
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from topictk.config.loader import Config, parse_override
from topictk.errors import ConfigError, UsageError
from topictk.inference.registry import load_config
from topictk.rundir import checkpoint as ckpt
from topictk.rundir.guard import check_run_output, is_run, run_inputs
from topictk.rundir.layout import MODEL_FILE
from topictk.training.run import TrainResult, train

log = logging.getLogger("topictk")

_SAFE = re.compile(r"[A-Za-z0-9._+-]")
MAX_NAME_BYTES = 255


@dataclass(frozen=True)
class SweepRun:
    """One setting of a sweep: its folder name and validated config."""

    name: str
    setting: tuple[tuple[str, str], ...]
    config: Config


def split_values(text: str) -> list[str]:
    """``a,b,[1,2],"x,y"`` -> ``a``, ``b``, ``[1,2]``, ``"x,y"``: commas inside brackets,
    braces or quotes do not separate values."""
    values, current, depth, quote = [], [], 0, None
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            values.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    values.append("".join(current).strip())
    return values


def parse_sweep(specs: list[str]) -> list[tuple[str, list[str]]]:
    """``--sweep`` options -> [(key, values)] in the order given."""
    parsed, keys = [], set()
    for spec in specs:
        key, sep, raw = spec.partition("=")
        key = key.strip()
        values = split_values(raw) if sep else []
        if not key or not sep or not any(values) or not all(values):
            raise UsageError(f"--sweep expects section.key=value1,value2,...; got {spec!r}")
        if key in ("output", "corpus") or key.startswith("output."):
            raise UsageError(f"--sweep {key}: the sweep names the output of every run; sweep "
                             f"model, inference, training or evaluation keys")
        if key in keys:
            raise UsageError(f"--sweep {key} is given twice; give all its values in one "
                             f"--sweep {key}=v1,v2,...")
        if len(set(values)) != len(values):
            raise UsageError(f"--sweep {spec}: a value is given twice")
        _refuse_equal_values(spec, key, values)
        keys.add(key)
        parsed.append((key, values))
    return parsed


def _as_compared(value):
    """A swept value as the config compares it: numbers by value (``5``, ``05``, ``5.0``
    and ``1e1``/``10`` are one), booleans apart from numbers, lists and mappings item by
    item."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)      # 10 == 10.0, with one hash
    if isinstance(value, list):
        return ("list", tuple(_as_compared(v) for v in value))
    if isinstance(value, dict):
        return ("mapping", tuple(sorted((str(k), _as_compared(v)) for k, v in value.items())))
    return ("text", str(value))


def _refuse_equal_values(spec: str, key: str, values: list[str]) -> None:
    """Refuse two spellings of one value (``5,05``, ``1e1,10``, ``0.10,0.1``): each would
    train the same run again, into a folder of its own."""
    seen: dict = {}
    for text in values:
        try:
            parsed = parse_override(f"{key}={text}")[1]
        except ConfigError:
            continue            # the setting's config check says what is wrong with it
        try:
            compared = _as_compared(parsed)
            first = seen.get(compared)
        except TypeError:       # a value that cannot be compared is compared as written
            continue
        if first is not None:
            raise UsageError(f"--sweep {spec}: {first} and {text} are the same value; give "
                             f"each value once")
        seen[compared] = text


def folder_name(setting: tuple[tuple[str, str], ...]) -> str:
    """The folder of one setting (see the module docstring for the scheme)."""
    def encode(text: str) -> str:
        out = "".join(c if _SAFE.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode())
                      for c in text)
        return out[:-1] + "%2E" if out.endswith(".") else out

    return ",".join(f"{key}={encode(value)}" for key, value in setting)


def plan_sweep(config_path: str, overrides: list[str], specs: list[str],
               output: str | None = None,
               labels: dict[str, str] | None = None) -> list[SweepRun]:
    """Every setting of the sweep with its validated config, before anything is trained.

    Parameters
    ----------
    config_path : str
        The experiment YAML.
    overrides : list of str
        ``--set`` overrides applied to every setting (the swept keys are applied after them).
    specs : list of str
        The ``--sweep KEY=V1,V2,...`` options.
    output : str, optional
        The folder of the sweep's runs (default: the config's ``output``).
    labels : dict of str to str, optional
        The option each override stands for in messages (see ``load_config``).

    Raises
    ------
    ConfigError
        A swept key that does not exist or a value it refuses, naming the ``--sweep`` option
        and the allowed values.
    """
    base = load_config(config_path, overrides, labels=labels)
    root = Path(output).resolve() if output else base.output
    swept = parse_sweep(specs)
    plans, folded = [], {}
    for combination in itertools.product(*(values for _, values in swept)):
        setting = tuple(zip((key for key, _ in swept), combination))
        name = folder_name(setting)
        if len(name.encode()) > MAX_NAME_BYTES:
            raise UsageError(f"--sweep: the folder name {name[:60]}... is longer than "
                             f"{MAX_NAME_BYTES} bytes; sweep fewer keys or shorter values")
        if name.casefold() in folded:
            raise UsageError(f"--sweep: settings {folded[name.casefold()]} and {name} differ "
                             f"only in case, which some file systems do not tell apart; give "
                             f"values that differ otherwise")
        folded[name.casefold()] = name
        extra = [f"{key}={value}" for key, value in setting]
        try:
            swept_labels = {**(labels or {}), **{text: f"--sweep {text}" for text in extra}}
            config = load_config(config_path, [*overrides, *extra, f"output={root / name}"],
                                 labels=swept_labels)
        except ConfigError as exc:
            if any(f"--sweep {text}" in str(exc) for text in extra):
                raise
            raise ConfigError(f"--sweep {', '.join(extra)}: {exc}") from None
        config.shown["output"] = os.path.normpath(Path(output or base.shown["output"]) / name)
        plans.append(SweepRun(name=name, setting=setting, config=config))
    return plans


def _finished(run_dir: Path, iterations: int) -> bool:
    """Whether the run in ``run_dir`` has its final model at ``iterations`` steps."""
    model = run_dir / MODEL_FILE
    if not model.is_file():
        return False
    header, _ = ckpt.load_arrays(model)
    return (header.get("status") == "completed"
            and int(header["state"]["step"]) >= iterations)


def _has_checkpoint(run_dir: Path) -> bool:
    return bool(ckpt.list_checkpoints(run_dir / "checkpoints")) or (run_dir / MODEL_FILE).exists()


def check_sweep_outputs(plans: list[SweepRun], *, resume: bool, force: bool) -> None:
    """Refuse, before any training, a sweep whose runs may not be written: without
    ``--resume`` or ``--force`` an existing run; with them, as ``train`` checks one run."""
    for plan in plans:
        check_run_output(plan.config.output, resume=resume and _has_checkpoint(
            plan.config.output), force=force or resume, inputs=run_inputs(plan.config))


def train_sweep(plans: list[SweepRun], *, resume: bool = False, force: bool = False,
                quiet: bool = False):
    """Train every run of the sweep in turn; yields (plan, TrainResult or None when skipped).

    With ``resume``, a finished run is skipped, one with a checkpoint is resumed and one that
    stopped before its first checkpoint is started again; the caller stops at a run that was
    interrupted.
    """
    check_sweep_outputs(plans, resume=resume, force=force)
    for plan in plans:
        run_dir = plan.config.output
        iterations = int(plan.config.inference.iterations)
        if resume and _finished(run_dir, iterations):
            log.info("%s: finished (%d steps); skipped", plan.config.shown["output"],
                     iterations)
            yield plan, None
            continue
        continues = resume and _has_checkpoint(run_dir)
        restart = resume and not continues and run_dir.is_dir() and is_run(run_dir)
        result: TrainResult = train(plan.config, resume=continues, force=force or restart,
                                    quiet=quiet)
        yield plan, result
