"""Click options shared by several commands."""
from __future__ import annotations

import click

from topictk.errors import UsageError

quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bar or log lines.")
threads_option = click.option("--threads", type=click.IntRange(min=1), default=None,
                              help="Threads for evaluation (default: the run's training.threads).")
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
