"""``topictk config`` and ``topictk algorithms``."""
from __future__ import annotations

import os
import re
from pathlib import Path

import click

from topictk._fileio import atomic_write_text
from topictk.config.loader import _store_counts as store_counts
from topictk.config.template import check_algorithm, example_text, render_config
from topictk.corpus.features import DEFAULT_SPLINE_DF, MIN_SPLINE_DF
from topictk.errors import UsageError
from topictk.inference.registry import CATALOGUE, algorithm_table
from topictk.rundir.guard import check_output_file


@click.command()
@click.argument("algorithm", required=False)
@click.option("--corpus", type=click.Path(file_okay=False, path_type=str), default=None,
              metavar="STORE", help="The corpus store to train on, written as typed; with "
                                    "--out, a relative STORE is written relative to the "
                                    "file's folder, so that it names the same store.")
@click.option("--topics", "-k", type=click.IntRange(min=1), default=None,
              help="Number of topics K (deep LDA: one layer of K).")
@click.option("--example", default=None, metavar="NAME",
              help="Print the bundled example config NAME instead (e.g. gibbs, dlda, "
                   "20news_dlda_tlasgr_128).")
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=str), default=None,
              metavar="FILE", help="Write the config to FILE (atomically) instead of standard "
                                   "output.")
@click.option("--force", is_flag=True, help="Replace the --out file if it exists.")
@click.option("--over-time", "over_time", default=None, metavar="slice|splineN",
              help="A DMR config (dmr-sem, dmr-sgrld) whose features are the store's time "
                   "slices: one per slice (slice), or a smooth basis of time with N columns "
                   "(splineN, N >= 3; spline: 5), for topic prevalence over time "
                   "(topictk topics RUN --over-time).")
def config(algorithm, corpus, topics, example, out, force, over_time):
    """Print a complete, commented YAML config for ALGORITHM: every key with its default.

    Train it with:  topictk config gibbs --corpus STORE | topictk train --config -
    """
    out_path = check_output_file(out, force=force, inputs=[corpus] if corpus else [])
    if example is not None:
        if (algorithm is not None or corpus is not None or topics is not None
                or over_time is not None):
            raise UsageError("--example NAME prints a bundled config as it is: give no "
                             "ALGORITHM, --corpus, --topics or --over-time with it")
        text = example_text(example)
    elif algorithm is None:
        raise UsageError("give an ALGORITHM (topictk algorithms lists them) or --example NAME")
    else:
        counts = store_counts(corpus) if corpus is not None else None
        model = (time_features(over_time, algorithm, corpus, counts)
                 if over_time is not None else None)
        text = render_config(algorithm, CATALOGUE, corpus=written_corpus(corpus, out),
                             topics=topics,
                             documents=counts["train_documents"] if counts else None,
                             model=model)
    if out_path is None:
        click.echo(text, nl=False)
    else:
        atomic_write_text(out_path, text)


def time_features(over_time: str, algorithm: str, corpus: str | None,
                  counts: dict | None) -> dict:
    """The ``model`` keys of ``--over-time slice|splineN`` (a DMR run's features from the
    store's time slices), checked against the algorithm and, when given, the store's
    ``counts``."""
    match = re.fullmatch(r"(slice)|spline(\d*)", over_time)
    if match is None:
        raise UsageError(f"--over-time {over_time}: give slice (one feature per time slice) or "
                         f"splineN (a smooth basis of time with N >= 3 columns, e.g. spline5)")
    check_algorithm(algorithm, CATALOGUE)
    if CATALOGUE.get_driver(algorithm).traits.family != "dmr":
        raise UsageError(f"--over-time makes a DMR config, whose prior on topic prevalence "
                         f"depends on time: give dmr-sem or dmr-sgrld, not {algorithm} (dtm-sgld "
                         f"models time itself, without --over-time)")
    if counts is not None and not counts["time_slices"]:
        raise UsageError(f"{corpus}: --over-time needs a store with time slices, and it has "
                         f"none; prepare the corpus with --time-column FIELD")
    if match.group(1):
        return {"features": "slice"}
    columns = int(match.group(2) or DEFAULT_SPLINE_DF)
    if columns < MIN_SPLINE_DF:
        raise UsageError(f"--over-time {over_time}: a smooth basis needs at least "
                         f"{MIN_SPLINE_DF} columns (spline{MIN_SPLINE_DF})")
    return {"features": "spline", "spline_columns": columns}


def written_corpus(corpus: str | None, out: str | None) -> str | None:
    """``--corpus`` as the generated config holds it: as typed, which is where a config read
    from standard input or saved in the working directory looks; with ``--out FILE`` a relative
    path is rewritten relative to FILE's folder, which a config file's paths are relative to
    (``--corpus runs/store --out exp/a.yaml`` writes ``../runs/store``)."""
    if corpus is None or out is None or Path(corpus).is_absolute():
        return corpus
    return os.path.relpath(corpus, os.path.dirname(out) or os.curdir)


@click.command()
def algorithms():
    """List the algorithms: model, family, threads, resume, cluster support and papers."""
    click.echo("\n".join(algorithm_table()))
