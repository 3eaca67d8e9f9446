"""``topictk train``."""
from __future__ import annotations

import logging
import math
import os
import re
from pathlib import Path

import click

from topictk.cli.options import cluster_options, cluster_overrides, quiet_option
from topictk.errors import TopictkError
from topictk.inference.registry import load_config
from topictk.rundir.guard import is_run
from topictk.training.grow import check_continue_options
from topictk.training.grow import continue_run as grow_run
from topictk.training.run import train as run_training
from topictk.training.sweep import plan_sweep, train_sweep

_EXIT = {"SIGINT": 130, "SIGTERM": 143}


@click.command()
@click.option("--config", "-c", "config_path",
              type=click.Path(dir_okay=False, allow_dash=True, path_type=str),
              help="Experiment YAML file; - reads it from standard input (paths in it are then "
                   "relative to the working directory). Required unless --continue.")
@click.option("--continue", "continue_run", metavar="RUN",
              type=click.Path(file_okay=False, path_type=str),
              help="Continue the trained run RUN with the documents of --add STORE, into the "
                   "new run --out NEWRUN (RUN is never changed); --set inference.iterations=N "
                   "then counts the steps beyond RUN's.")
@click.option("--add", "add_store", metavar="STORE",
              type=click.Path(file_okay=False, path_type=str),
              help="With --continue: the corpus store of the documents to add (prepared with "
                   "--test-docs 0 and RUN's preprocessing).")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override a config key (repeatable).")
@click.option("--out", type=click.Path(file_okay=False, path_type=str),
              help="Run directory (overrides the config's output).")
@click.option("--sweep", "sweeps", multiple=True, metavar="SECTION.KEY=V1,V2,...",
              help="Train one run per value into OUTPUT/KEY=VALUE (repeatable: every "
                   "combination, in OUTPUT/KEY=VALUE,KEY=VALUE); all settings are checked "
                   "before the first run.")
@click.option("--resume", is_flag=True, help="Continue from the latest checkpoint of the run "
                                             "(with --sweep: finish the unfinished runs, skip "
                                             "the finished ones).")
@click.option("--force", is_flag=True, help="Replace an existing run in the output directory.")
@cluster_options
@quiet_option
def train(config_path, continue_run, add_store, overrides, sweeps, out, resume, force,
          scheduler, dask_workers, quiet):
    """Train the model of an experiment config, checkpointing and logging as it goes; or
    continue a trained run with added documents (--continue RUN --add STORE --out NEWRUN)."""
    if quiet:
        logging.getLogger("topictk").setLevel(logging.WARNING)
    if continue_run or add_store:
        check_continue_options(continue_run, add_store, config_path, sweeps, scheduler,
                               dask_workers)
        _report(grow_run(continue_run, add_store, out, list(overrides), force=force,
                         resume=resume, quiet=quiet), str(Path(out)))
        return
    if config_path is None:
        raise click.UsageError("Missing option '--config' / '-c' (or --continue RUN --add "
                               "STORE).")
    overrides = list(overrides) + cluster_overrides(scheduler, dask_workers)
    labels = _option_labels(scheduler, dask_workers, out)
    if sweeps:
        plans = plan_sweep(config_path, overrides, list(sweeps), out, labels)
        for plan, result in train_sweep(plans, resume=resume, force=force, quiet=quiet):
            if result is None:
                click.echo(f"{plan.config.shown['output']}: finished; skipped")
            else:
                _report(result, plan.config.shown["output"])
        return
    shown = None
    if out:
        # --out is relative to the working directory, as in other tools; output: in the
        # config (and --set output=) to the config's folder
        overrides.append(f"output={Path(out).resolve()}")
        shown = os.path.normpath(out)
    elif _is_run_config(config_path) and not any(o.startswith("output=") for o in overrides):
        # a run's own config.yaml trains that run where it is now, also one of an earlier
        # release, which saved the absolute path it was first written to
        overrides.append(f"output={Path(config_path).parent.resolve()}")
        shown = os.path.normpath(Path(config_path).parent)
    config = load_config(config_path, overrides, labels=labels)
    if shown is not None:
        config.shown["output"] = shown
    try:
        result = run_training(config, resume=resume, force=force, quiet=quiet)
    except TopictkError as exc:
        exc.args = (as_typed(str(exc), config),)
        raise
    _report(result, config.shown["output"])


def as_typed(message: str, config) -> str:
    """``message`` with the run directory and corpus store named as the user gave them
    (``config.shown``) instead of the absolute paths training works with."""
    for key in sorted(("output", "corpus"), key=lambda k: -len(str(getattr(config, k)))):
        message = re.sub(re.escape(str(getattr(config, key))) + r"(?=$|[/\s:;,'\")])",
                         lambda _, key=key: config.shown[key], message)
    return message


def _is_run_config(config_path: str) -> bool:
    path = Path(config_path)
    return config_path != "-" and path.name == "config.yaml" and is_run(path.parent)


def _option_labels(scheduler: str | None, dask_workers: int | None,
                   out: str | None) -> dict[str, str]:
    """The config overrides these options stand for, each with the option as typed: an
    error about its value names the option, not a --set the user never gave."""
    given = [(f"training.scheduler={scheduler}", f"--scheduler {scheduler}", scheduler),
             (f"training.dask_workers={dask_workers}", f"--dask-workers {dask_workers}",
              dask_workers),
             (f"output={Path(out).resolve() if out else ''}", f"--out {out}", out)]
    return {override: option for override, option, value in given if value is not None}


def _report(result, shown: str | None = None) -> None:
    """The run's last line on stdout; an interrupted run ends the command with its signal's
    exit code."""
    known = result.perplexity is not None and math.isfinite(result.perplexity)
    ppl = f", point perplexity {result.perplexity:.2f}" if known else ""
    if result.status == "interrupted":
        click.echo(f"topictk: {result.signal_name} received: stopped at step {result.step}, "
                   f"checkpoint written; continue with --resume", err=True)
        raise SystemExit(_EXIT.get(result.signal_name, 1))
    if result.status == "time_limit":
        click.echo(f"topictk: training.time_limit reached at step {result.step}; checkpoint and "
                   f"model written; continue with --resume", err=True)
    click.echo(f"{shown or result.run_dir}: step {result.step}{ppl}")
