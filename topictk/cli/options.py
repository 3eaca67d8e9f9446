"""Click options shared by several commands."""
from __future__ import annotations

import click

from topictk import progress
from topictk.config.loader import scheduler_problem
from topictk.corpus.tables import DEFAULT_TEXT_COLUMN, TableOptions, parse_delimiter
from topictk.errors import UsageError
from topictk.limits import cap_threads, local_workers_problem

# the name of standard output in messages about writing it
STDOUT = "<stdout>"


def _quiet_progress(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """With -q, no progress bar of the command (:mod:`topictk.progress`) until it ends."""
    if value:
        ctx.with_resource(progress.quiet())
    return value


quiet_option = click.option("-q", "--quiet", is_flag=True, callback=_quiet_progress,
                            help="No progress bar or log lines.")


def _capped_threads(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    return None if value is None else cap_threads(value, "--threads")


def threads_option(help_text: str = "Threads for evaluation (default: the run's "
                                    "training.threads)."):
    """``--threads N``, lowered to what the machine can use (see :func:`cap_threads`)."""
    return click.option("--threads", type=click.IntRange(min=1), default=None,
                        callback=_capped_threads, help=help_text)


run_dir_argument = click.argument("run_dir", type=click.Path(file_okay=False, path_type=str))


def meta_file_option(help_text: str):
    """``--meta-file``, taken once: given twice, click would silently keep the last."""
    return click.option("--meta-file", "meta_file", type=click.Path(dir_okay=False, path_type=str),
                        multiple=True, help=help_text)


def single(values: tuple, option: str) -> str | None:
    """The one value of a ``multiple=True`` option that must be given at most once."""
    if len(values) > 1:
        raise UsageError(f"{option} is given {len(values)} times ({', '.join(values)}); give it "
                         f"once")
    return values[0] if values else None


def cluster_options(command):
    """``--scheduler`` and ``--dask-workers``: where the shards of the work run."""
    command = click.option("--dask-workers", "dask_workers", type=click.IntRange(min=1),
                           default=None, metavar="N",
                           help="Start a local Dask cluster of N worker processes for this run "
                                "(needs the dask extra).")(command)
    return click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="Run on the Dask cluster of this scheduler (needs the dask "
                             "extra).")(command)


def cluster_overrides(scheduler: str | None, dask_workers: int | None) -> list[str]:
    """The config overrides of the cluster options: one replaces the other's config key."""
    if scheduler is not None and dask_workers is not None:
        raise UsageError("--scheduler and --dask-workers exclude each other: run on the "
                         "scheduler's cluster or on a local one")
    if scheduler is not None:
        problem = scheduler_problem(scheduler)
        if problem is not None:
            raise UsageError(f"--scheduler {problem}")
        return [f"training.scheduler={scheduler}", "training.dask_workers=null"]
    if dask_workers is not None:
        problem = local_workers_problem(dask_workers)
        if problem is not None:
            raise UsageError(f"--dask-workers: {problem}")
        return [f"training.dask_workers={dask_workers}", "training.scheduler=null"]
    return []


def table_options(command):
    """``--text-column``, ``--id-column`` and ``--delimiter`` of CSV/TSV input."""
    command = click.option("--delimiter", default=None, metavar="CHAR",
                           help="CSV/TSV: the delimiter (tab: 'tab'; default: tab for .tsv, "
                                "sniffed from the start of a .csv file).")(command)
    command = click.option("--id-column", default=None, metavar="NAME",
                           help="CSV/TSV: the column of document ids (default: FILE:LINE).")(
        command)
    return click.option("--text-column", "text_columns", multiple=True, metavar="NAME",
                        help="CSV/TSV: the column of the text (default: text); repeat it to "
                             "join several columns.")(command)


def table_from(text_columns: tuple, id_column: str | None,
               delimiter: str | None) -> TableOptions | None:
    """The CSV/TSV options given, or None when none was."""
    if not text_columns and id_column is None and delimiter is None:
        return None
    return TableOptions(text_columns=tuple(text_columns) or (DEFAULT_TEXT_COLUMN,),
                        id_column=id_column, delimiter=parse_delimiter(delimiter))


allow_different_option = click.option(
    "--allow-different-corpora", "allow_different_corpora", is_flag=True,
    help="Accept runs trained on different corpus stores, their perplexities marked as not "
         "comparable (they are computed on different held-out tokens).")
