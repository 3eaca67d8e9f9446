"""Click options shared by several commands."""
from __future__ import annotations

import click

quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bar or log lines.")
threads_option = click.option("--threads", type=click.IntRange(min=1), default=None,
                              help="Threads for evaluation (default: the run's training.threads).")
run_dir_argument = click.argument("run_dir", type=click.Path(file_okay=False, path_type=str))
