"""``topictk topics``."""
from __future__ import annotations

import click

from topictk.cli.options import run_dir_argument
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.topics import format_topics, topic_table


@click.command()
@run_dir_argument
@click.option("--top", "-n", type=click.IntRange(min=1), default=10, show_default=True,
              help="Words per topic.")
@click.option("--format", "fmt", type=click.Choice(["text", "tsv", "json"]), default="text",
              show_default=True)
@click.option("--checkpoint", type=int, default=None, metavar="STEP",
              help="Read this checkpoint instead of the final model.")
def topics(run_dir, top, fmt, checkpoint):
    """Top words of every topic with their probabilities."""
    run = LoadedRun(run_dir, checkpoint)
    table = topic_table(run.driver.topic_word(run.state), run.store.vocab, top)
    click.echo(format_topics(table, fmt), nl=False)
