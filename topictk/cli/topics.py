"""``topictk topics``."""
from __future__ import annotations

import click

from topictk.cli.options import run_dir_argument
from topictk.evaluation.diagnostics import render_diagnostics
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.topics import render_topics


@click.command()
@run_dir_argument
@click.option("--top", "-n", type=click.IntRange(min=1), default=10, show_default=True,
              help="Words per topic.")
@click.option("--format", "fmt", type=click.Choice(["text", "tsv", "json", "dot"]),
              default="text", show_default=True, help="dot: the topic tree as Graphviz DOT.")
@click.option("--checkpoint", type=click.IntRange(min=0), default=None, metavar="STEP",
              help="Read this checkpoint instead of the final model.")
@click.option("--layer", type=click.IntRange(min=1), default=None, metavar="L",
              help="Deep models: only layer L (1 = the word layer); with --tree, the roots.")
@click.option("--tree", is_flag=True,
              help="Deep models: the hierarchy, each topic with its strongest children.")
@click.option("--children", type=click.IntRange(min=1), default=3, show_default=True,
              help="Children per topic in --tree.")
@click.option("--features", type=click.IntRange(min=0), default=3, show_default=True,
              help="DMR: metadata features per topic, those with the largest weights.")
@click.option("--diagnostics", is_flag=True,
              help="Per-topic diagnostics (tokens, document entropy, effective words, "
                   "distance from the corpus, top-document share, word length) and junk "
                   "flags, with the top words.")
def topics(run_dir, top, fmt, checkpoint, layer, tree, children, features, diagnostics):
    """Top words of every topic with their probabilities (per layer for deep models)."""
    run = LoadedRun(run_dir, checkpoint)
    if diagnostics:
        click.echo(render_diagnostics(run, fmt=fmt, top=top, layer=layer, tree=tree), nl=False)
        return
    click.echo(render_topics(run.driver, run.state, run.store.vocab, top=top, fmt=fmt,
                             layer=layer, tree=tree, children=children, features=features),
               nl=False)
