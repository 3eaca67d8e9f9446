"""``topictk config`` and ``topictk algorithms``."""
from __future__ import annotations

from pathlib import Path

import click

from topictk.config.template import example_text, render_config
from topictk.errors import UsageError
from topictk.inference.registry import CATALOGUE, algorithm_table


@click.command()
@click.argument("algorithm", required=False)
@click.option("--corpus", type=click.Path(file_okay=False, path_type=str), default=None,
              metavar="STORE", help="The corpus store to train on (written as an absolute path).")
@click.option("--topics", "-k", type=click.IntRange(min=1), default=None,
              help="Number of topics K (deep LDA: one layer of K).")
@click.option("--example", default=None, metavar="NAME",
              help="Print the bundled example config NAME instead (e.g. gibbs, dlda, "
                   "20news_dlda_tlasgr_128).")
def config(algorithm, corpus, topics, example):
    """Print a complete, commented YAML config for ALGORITHM: every key with its default.

    Train it with:  topictk config gibbs --corpus STORE | topictk train --config -
    """
    if example is not None:
        if algorithm is not None or corpus is not None or topics is not None:
            raise UsageError("--example NAME prints a bundled config as it is: give no "
                             "ALGORITHM, --corpus or --topics with it")
        click.echo(example_text(example), nl=False)
        return
    if algorithm is None:
        raise UsageError("give an ALGORITHM (topictk algorithms lists them) or --example NAME")
    store = str(Path(corpus).resolve()) if corpus is not None else None
    click.echo(render_config(algorithm, CATALOGUE, corpus=store, topics=topics), nl=False)


@click.command()
def algorithms():
    """List the algorithms: model, family, threads, resume, cluster support and papers."""
    click.echo("\n".join(algorithm_table()))
