"""``topictk report``."""
from __future__ import annotations

import click

from topictk import __version__
from topictk._fileio import atomic_write_text
from topictk.evaluation.ldavis import DEFAULT_TERMS
from topictk.evaluation.report import check_runs, gather
from topictk.evaluation.report_html import render
from topictk.rundir.guard import check_output_file


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", "-o", "out", type=click.Path(), required=True,
              help="The HTML file to write (atomically); never an input, a file in a run or "
                   "corpus store, or anything but a regular file.")
@click.option("--force", is_flag=True, help="Replace the --out file if it exists.")
@click.option("--allow-different-corpora", is_flag=True,
              help="Report runs of different corpus stores, their perplexities marked as not "
                   "comparable (they are measured on different held-out tokens).")
@click.option("--terms", type=click.IntRange(min=1, max=100), default=DEFAULT_TERMS,
              show_default=True, help="Terms in a topic's bar chart.")
def report(runs, out, force, allow_different_corpora, terms):
    """One self-contained HTML page about RUNS: summary, perplexity curves, topic maps.

    The page works offline (every script and style inlined) and is opened from the file
    system without a server.
    """
    paths = check_runs(list(runs))
    out_path = check_output_file(out, force=force, inputs=paths)
    reports = gather(paths, allow_different_corpora=allow_different_corpora, n_terms=terms)
    atomic_write_text(out_path, render(reports, __version__))
    click.echo(f"{out_path}: report of {len(reports)} run(s)", err=True)
