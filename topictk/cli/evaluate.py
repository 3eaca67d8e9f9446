"""``topictk evaluate``."""
from __future__ import annotations

import json

import click

from topictk.cli.options import run_dir_argument, threads_option
from topictk.evaluation.run import evaluate_run


@click.command()
@run_dir_argument
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--checkpoint", type=click.IntRange(min=0), default=None, metavar="STEP",
              help="Evaluate this checkpoint instead of the final model.")
@threads_option
def evaluate(run_dir, as_json, checkpoint, threads):
    """Held-out perplexity (document completion), UMass, NPMI and topic diversity of a run."""
    result = evaluate_run(run_dir, checkpoint, threads)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
        return
    ppl = result.get("perplexity")
    click.echo(f"run:         {result['run']} ({result['algorithm']}, K = {result['topics']}, "
               f"step {result['step']})")
    if ppl is not None:
        click.echo(f"perplexity:  {ppl:.3f}  ({result['heldout_tokens']:,} held-out tokens, "
                   f"{result['samples']} sample(s))")
    else:
        click.echo("perplexity:  n/a (the corpus store has no held-out tokens)")
    click.echo(f"umass:       {result['umass']:.4f}")
    click.echo(f"npmi:        {result['npmi']:.4f}")
    click.echo(f"diversity:   {result['diversity']:.4f}")
