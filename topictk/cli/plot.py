"""``topictk plot``."""
from __future__ import annotations

import logging

import click

from topictk._fileio import atomic_write_bytes
from topictk.cli.options import allow_different_option, quiet_option
from topictk.errors import UsageError
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
@click.option("--k-panel", "k_panel_", is_flag=True,
              help="Instead of curves, the scores of a sweep against K (or another swept "
                   "numeric setting) as small multiples, as the report's Scores against K "
                   "panel draws them.")
@click.option("--reference", default=None, metavar="STORE",
              help="With --k-panel: a corpus store whose training texts give an NPMI chart "
                   "on other texts (words matched by their spelling).")
@allow_different_option
@quiet_option
def plot(runs, out, force, x, metric, k_panel_, reference, allow_different_corpora, quiet):
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
    if k_panel_:
        _plot_k_panel(found, out_path, fmt, reference, allow_different_corpora, quiet)
        return
    if reference is not None:
        raise UsageError("--reference gives the --k-panel figure its reference NPMI; add "
                         "--k-panel, or leave --reference out")
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


def _plot_k_panel(found, out_path, fmt, reference, allow_different_corpora, quiet) -> None:
    from topictk.evaluation.kpanel import check_reference, k_panel
    from topictk.evaluation.kpanel_plot import draw_k_panel

    panel = k_panel(found, reference=check_reference(reference),
                    allow_different_corpora=allow_different_corpora, quiet=quiet)
    if panel is None:
        raise UsageError("--k-panel: the runs are not a sweep of two or more values of a "
                         "numeric setting (such as 'topictk train --sweep model.topics=10,20,50 "
                         "--sweep training.seed=1,2,3'); give the sweep's output folder")
    for line in panel.warnings:
        log.warning("%s", line)
    data = draw_k_panel(panel, fmt)
    atomic_write_bytes(out_path, lambda f: f.write(data))
    click.echo(f"{out_path}: scores against {panel.x_label} of {len(panel.runs)} run(s)")
