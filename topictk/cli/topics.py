"""``topictk topics``."""
from __future__ import annotations

import json

import click

from topictk.cli.options import quiet_option, run_dir_argument
from topictk.evaluation.seed_ranks import render_seed_ranks, seed_ranks
from topictk.evaluation.diagnostics import render_diagnostics
from topictk.evaluation.over_time import render_over_time
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.run_score import run_score, score_line
from topictk.evaluation.topic_listing import annotator
from topictk.evaluation.topics import render_topics


@click.command()
@run_dir_argument
@click.option("--score", is_flag=True,
              help="Compute the run's held-out perplexity (as 'topictk evaluate' does, cached "
                   "in its scores.json) when it is not cached yet; without --score it is only "
                   "read.")
@quiet_option
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
@click.option("--labels", "labels_file", type=click.Path(dir_okay=False), default=None,
              help="Topic labels from this file (topic<TAB>label lines) instead of the run's "
                   "labels.tsv.")
@click.option("--docs", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="The N most representative training documents of each topic (largest "
                   "theta_dk), with the start of their text when the store keeps it "
                   "(prepare --snippets).")
@click.option("--seeds", "seeds", is_flag=True,
              help="Each seed word's rank in its topic and its probability (words not in "
                   "the vocabulary marked); * marks a rank outside --top.")
@click.option("--over-time", "over_time", is_flag=True,
              help="Each topic in every time slice of the store (prepare --time-column): "
                   "a dynamic topic model run's version of the topic in the slice (top words "
                   "and prevalence), or a DMR run's prior E[theta] for the metadata of the "
                   "slice's training documents (docs/evaluate.md, 'Topics over time').")
@click.option("--diagnostics", is_flag=True,
              help="Per-topic diagnostics (tokens, document entropy, effective words, "
                   "distance from the corpus, top-document share, word length) and junk "
                   "flags, with the top words.")
def topics(run_dir, score, quiet, top, fmt, checkpoint, layer, tree, children, features,
           labels_file, docs, over_time, diagnostics, seeds):
    """Top words of every topic with their probabilities (per layer for deep models).

    Text and JSON output start with the run's held-out perplexity as 'topictk evaluate'
    computes it, when its scores.json holds it (or with --score); never the in-training
    estimate."""
    run = LoadedRun(run_dir, checkpoint)
    if seeds:
        if fmt not in ("text", "json"):
            raise click.UsageError("--seeds writes text or json; give --format text or json")
        records = seed_ranks(run.config, run.driver.topic_word(run.state), run.store.vocab)
        click.echo(render_seed_ranks(records, fmt, top), nl=False)
        return
    if over_time:
        click.echo(render_over_time(run.driver, run.state, run.store, top=top, fmt=fmt),
                   nl=False)
        return
    if diagnostics:
        click.echo(render_diagnostics(run, fmt=fmt, top=top, layer=layer, tree=tree), nl=False)
        return
    click.echo(with_score(render_topics(run.driver, run.state, run.store.vocab, top=top,
                                        fmt=fmt, layer=layer, tree=tree, children=children,
                                        features=features,
                                        annotate=annotator(run, labels_file=labels_file,
                                                           docs=docs, fmt=fmt)),
                                  run, fmt, score), nl=False)


def with_score(text: str, run: LoadedRun, fmt: str, compute: bool) -> str:
    """``text`` headed by the run's score: a line (text) or a ``score`` field (JSON); TSV and
    DOT are tables and graphs other programs read, left as they are."""
    if fmt not in ("text", "json"):
        return text
    found = run_score(run.run_dir, run.config, run.checkpoint, compute=compute, loaded=run)
    if fmt == "text":
        return f"{score_line(found)}\n\n{text}"
    return json.dumps({"score": found, **json.loads(text)}) + "\n"
