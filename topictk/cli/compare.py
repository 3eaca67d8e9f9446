"""``topictk compare``."""
from __future__ import annotations

import logging

import click

from topictk.cli.options import allow_different_option, quiet_option, threads_option
from topictk.errors import UsageError
from topictk.evaluation.compare import (
    align_runs,
    compare_runs,
    render_alignments,
    render_rows,
)
from topictk.evaluation.labels import labels_for_runs
from topictk.evaluation.left_to_right import DEFAULT_PARTICLES
from topictk.evaluation.topic_listing import alignment_labels
from topictk.cli.evaluate import FOLD_INS
from topictk.evaluation.runs import (check_same_store, discover_runs, protocol_differences,
                                     scored_with)
from topictk.evaluation.scores import protocol_line

log = logging.getLogger("topictk")


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "tsv", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--left-to-right", "left_to_right", is_flag=True,
              help="Also the left-to-right perplexity of every run (slow; see evaluate).")
@click.option("--particles", type=click.IntRange(min=1), default=None,
              help=f"Particles of the left-to-right estimator [default: {DEFAULT_PARTICLES}].")
@click.option("--align", is_flag=True,
              help="Match the topics of every other run to those of the first by least "
                   "Jensen-Shannon distance; print the pairs and the median distance.")
@click.option("--top", "-n", type=click.IntRange(min=1), default=5, show_default=True,
              help="--align: top words shown per topic.")
@click.option("--labels", "labels_files", multiple=True, metavar="RUN=FILE",
              help="--align: topic labels of RUN from FILE instead of its labels.tsv (FILE "
                   "alone with one run); may be repeated.")
@click.option("--fold-in", "fold_in", type=click.Choice(FOLD_INS), default=None,
              help="Score every run with this estimator of theta (evaluation.fold_in) instead "
                   "of each run's own, so that runs of different families are compared on "
                   "one estimator (fixed-point applies to all but deep LDA; docs/evaluate.md).")
@click.option("--recompute", is_flag=True,
              help="Score every run again instead of reading the scores cached in its "
                   "scores.json (they are written again).")
@allow_different_option
@threads_option()
@quiet_option
def compare(runs, fmt, left_to_right, particles, align, top, labels_files,
            allow_different_corpora, fold_in, threads, recompute, quiet):
    """Scores of several runs side by side, lowest held-out perplexity first.

    Each RUN is a run directory or a folder of runs (such as the output of 'train --sweep').
    The perplexity is that of 'topictk evaluate', computed once per run and model and cached
    in the run's scores.json.
    """
    if particles is not None and not left_to_right:
        raise UsageError("--particles sets the left-to-right estimator's particles; add "
                         "--left-to-right")
    if align and left_to_right:
        raise UsageError("--align matches topics and scores nothing; leave out --left-to-right "
                         "or --align")
    found = discover_runs(runs)
    comparable = check_same_store(found, allow_different_corpora)
    if align:
        if len(found) < 2:
            raise UsageError(f"--align needs two runs or more; got {len(found)} "
                             f"({', '.join(runs)})")
        files = labels_for_runs(labels_files, [ref.path for ref in found])
        click.echo(render_alignments([alignment_labels(align_runs(found[0], other, top),
                                                       (found[0], other), files)
                                      for other in found[1:]], fmt), nl=False)
        return
    particles = (particles or DEFAULT_PARTICLES) if left_to_right else None
    found = scored_with(found, fold_in)
    differences = protocol_differences(found, particles)
    for line in differences:
        log.warning("the runs are scored differently: %s", line)
    rows = compare_runs(found, comparable=comparable, threads=threads, left_to_right=particles,
                        recompute=recompute, quiet=quiet)
    click.echo(render_rows(rows, fmt, comparable=comparable, left_to_right=left_to_right,
                           protocol=protocol_line(found[0].config, particles),
                           differences=differences), nl=False)
