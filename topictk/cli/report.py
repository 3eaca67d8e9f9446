"""``topictk report``."""
from __future__ import annotations

import logging

import click

from topictk import __version__
from topictk._fileio import atomic_write_text
from topictk.evaluation.ldavis import DEFAULT_TERMS
from topictk.cli.options import quiet_option
from topictk.evaluation.kpanel import check_reference, k_panel
from topictk.evaluation.report import check_runs, gather, protocol_differences
from topictk.evaluation.runs import discover_runs
from topictk.evaluation.report_html import render
from topictk.evaluation.labels import labels_for_runs
from topictk.evaluation.report_labels import relabel
from topictk.inference.registry import load_config
from topictk.rundir.guard import check_output_file

log = logging.getLogger("topictk")


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
@click.option("--reference", default=None, metavar="STORE",
              help="A corpus store (made by 'topictk prepare') whose training texts give the "
                   "Scores against K panel an NPMI chart on other texts (words matched by "
                   "their spelling).")
@click.option("--recompute", is_flag=True,
              help="Score every run again instead of reading the scores cached in its "
                   "scores.json (they are written again).")
@click.option("--labels", "labels_files", multiple=True, metavar="RUN=FILE",
              help="Topic labels of RUN from FILE instead of its labels.tsv (FILE alone with "
                   "one run); may be repeated.")
@quiet_option
def report(runs, out, force, allow_different_corpora, terms, reference, recompute,
           labels_files, quiet):
    """One self-contained HTML page about RUNS: summary, perplexity curves, topic maps.

    Each run's perplexity is that of 'topictk evaluate' (computed once and cached in the
    run's scores.json); the curves are the in-training estimates. Runs that sweep K (or
    another numeric setting) get a Scores against K panel. The page works offline (every
    script and style inlined) and is opened from the file system without a server.
    """
    paths = check_runs(list(runs))
    out_path = check_output_file(out, force=force, inputs=paths)
    reference_store = check_reference(reference)
    files = labels_for_runs(labels_files, paths)
    reports = gather(paths, allow_different_corpora=allow_different_corpora, n_terms=terms,
                     quiet=quiet, recompute=recompute)
    for r in reports:
        if r.path in files:
            relabel(r, load_config(r.path / "config.yaml"), files[r.path])
    for line in protocol_differences(reports):
        log.warning("the runs are scored differently: %s", line)
    panel = k_panel(discover_runs(paths), reference=reference_store,
                    allow_different_corpora=allow_different_corpora, quiet=quiet)
    if panel is None and reference is not None:
        log.warning("--reference: the runs are not a sweep of two or more values of a "
                    "numeric setting (such as model.topics), so there is no Scores against K "
                    "panel to add the reference NPMI to")
    atomic_write_text(out_path, render(reports, __version__, k_panel=panel))
    if not quiet:
        click.echo(f"{out_path}: report of {len(reports)} run(s)", err=True)
