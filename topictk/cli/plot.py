"""``topictk plot``."""
from __future__ import annotations

import logging

import click

from topictk._fileio import atomic_write_bytes
from topictk.cli.options import allow_different_option, quiet_option
from topictk.evaluation.plot import (
    ALIASES,
    X_AXES,
    curve_label,
    curves,
    draw,
    held_out_scores,
    figure_format,
    require_matplotlib,
)
from topictk.evaluation.runs import check_same_store, discover_runs, protocol_differences
from topictk.rundir.guard import check_output_file

log = logging.getLogger("topictk")


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--out", "-o", "out", type=click.Path(), required=True,
              help="The figure file: .png, .svg or .pdf (written atomically).")
@click.option("--force", is_flag=True, help="Replace the --out file if it exists.")
@click.option("--x", "x", type=click.Choice(list(X_AXES)), default="seconds", show_default=True,
              help="The horizontal axis: training seconds, tokens seen or steps.")
@click.option("--metric", default="perplexity", show_default=True,
              help=f"A metric the runs record in metrics.jsonl: {', '.join(ALIASES)}, or the "
                   f"algorithm's objective (an unknown name lists those recorded).")
@allow_different_option
@quiet_option
def plot(runs, out, force, x, metric, allow_different_corpora, quiet):
    """Curves of a metric along training, several runs on one figure (needs the plot extra).

    Each RUN is a run directory or a folder of runs (such as the output of 'train --sweep').
    The perplexity curves are the in-training estimates on the store's curve documents; each
    finished run's score, the held-out perplexity of 'topictk evaluate' (cached in its
    scores.json), is the star at the end of its line.
    """
    out_path = check_output_file(out, force=force, inputs=list(runs))
    fmt = figure_format(out_path)
    require_matplotlib()
    found = discover_runs(runs)
    comparable = check_same_store(found, allow_different_corpora)
    lines = curves(found, x, metric)
    ylabel, scores, warning = None, None, None
    if ALIASES.get(metric) == "perplexity_point":
        label = curve_label(found)
        ylabel = f"perplexity: {label or 'in-training estimates on different test documents'}"
        differences = protocol_differences(found)
        if label is None and len(found) > 1:
            differences.append("in-training curves: on different test documents")
        for line in differences:
            log.warning("the runs are scored differently: %s", line)
        if differences:
            warning = "scored differently, not ranked on equal terms: " + "; ".join(differences)
        scores = held_out_scores(found, quiet)
    data = draw(lines, x, metric, fmt, comparable=comparable, ylabel=ylabel, scores=scores,
                warning=warning)
    atomic_write_bytes(out_path, lambda f: f.write(data))
    click.echo(f"{out_path}: {metric} against {x} of {len(found)} run(s)")
