"""``topictk evaluate``."""
from __future__ import annotations

import json
from pathlib import Path

import click

from topictk.config.schema import EVALUATION
from topictk.cli.options import (cluster_options, cluster_overrides, quiet_option,
                                 run_dir_argument, threads_option)
from topictk.errors import UsageError
from topictk.evaluation.coherence import C_V_CAVEAT, GENSIM_MEASURES, WINDOW
from topictk.evaluation.left_to_right import DEFAULT_PARTICLES
from topictk.evaluation.run import evaluate_run
from topictk.rundir.metrics import curve_rise, read_metrics

FOLD_INS = tuple(EVALUATION["fold_in"].choices)


@click.command()
@run_dir_argument
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--checkpoint", type=click.IntRange(min=0), default=None, metavar="STEP",
              help="Evaluate this checkpoint instead of the final model.")
@click.option("--left-to-right", "left_to_right", is_flag=True,
              help="Also score the held-out tokens by the left-to-right estimator (Wallach et "
                   "al. 2009), which integrates theta out; O(particles x length^2 x K) per "
                   "document.")
@click.option("--particles", type=click.IntRange(min=1), default=None,
              help=f"Particles of the left-to-right estimator [default: {DEFAULT_PARTICLES}].")
@click.option("--coherence", default=None, metavar="MEASURES",
              help="Also these coherence measures of gensim's CoherenceModel, comma-separated: "
                   "c_v, c_npmi, c_uci, u_mass, or all (on the training texts, the topics' "
                   "top evaluation.coherence_top words).")
@click.option("--reference", default=None, metavar="STORE",
              help="Compute the --coherence measures on the training texts of this corpus "
                   "store instead (words matched by their spelling).")
@click.option("--fold-in", "fold_in", type=click.Choice(FOLD_INS), default=None,
              help="Estimator of theta to score with instead of the run's evaluation.fold_in: "
                   "gibbs, mh (collapsed Gibbs runs) or fixed-point (docs/evaluate.md, 'Two "
                   "estimators of theta'); cached apart from the run's own.")
@click.option("--recompute", is_flag=True,
              help="Score again instead of reading the scores cached in the run's "
                   "scores.json (they are written again).")
@threads_option()
@cluster_options
@quiet_option
def evaluate(run_dir, as_json, checkpoint, left_to_right, particles, coherence, reference,
             fold_in, recompute, threads, scheduler, dask_workers, quiet):
    """Held-out perplexity (document completion), UMass, NPMI and topic diversity of a run;
    with --coherence, gensim's coherence measures too.

    The scores are computed once per model, store and evaluation settings and cached in the
    run's scores.json, which compare, report and plot read too."""
    if particles is not None and not left_to_right:
        raise UsageError("--particles sets the left-to-right estimator's particles; add "
                         "--left-to-right")
    cluster_overrides(scheduler, dask_workers)      # they exclude each other
    result = evaluate_run(run_dir, checkpoint, threads,
                          left_to_right=(particles or DEFAULT_PARTICLES) if left_to_right
                          else None, scheduler=scheduler, dask_workers=dask_workers,
                          coherence=coherence, reference=reference, recompute=recompute,
                          fold_in=fold_in)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
        return
    ppl = result.get("perplexity")
    click.echo(f"run:         {result['run']} ({result['algorithm']}, K = {result['topics']}, "
               f"step {result['step']})")
    if ppl is not None:
        click.echo(f"perplexity:  {ppl:.3f}  ({result['heldout_tokens']:,} held-out tokens, "
                   f"{result['samples']} sample(s))")
        estimator = result.get("estimator")
        source = "evaluation.fold_in" if estimator in FOLD_INS else "the algorithm's own"
        click.echo(f"estimator:   theta by the {estimator} fold-in "
                   f"({source}; document completion, docs/evaluate.md)")
        by_slice = result.get("perplexity_by_slice")
        if by_slice:
            click.echo("by slice:    " + ", ".join(
                f"{name} {'n/a' if value is None else format(value, '.1f')}"
                for name, value in by_slice.items()))
    else:
        click.echo("perplexity:  n/a (the corpus store has no held-out tokens)")
    rise = curve_rise(read_metrics(Path(run_dir) / "metrics.jsonl"))
    if rise is not None and checkpoint is None:
        click.echo(f"curve:       {rise}")
    if "perplexity_left_to_right" in result:
        click.echo(f"left-to-right perplexity: {result['perplexity_left_to_right']:.3f}  "
                   f"({result['left_to_right_particles']} particles, "
                   f"{result['left_to_right_samples']} sample(s))")
    click.echo(f"umass:       {result['umass']:.4f}")
    click.echo(f"npmi:        {result['npmi']:.4f}")
    click.echo(f"diversity:   {result['diversity']:.4f}")
    if "coherence" in result:
        _echo_gensim_coherence(result)


def _echo_gensim_coherence(result: dict) -> None:
    """The gensim measures of ``result``, one line each, c_v followed by its caveat."""
    info = result["coherence"]
    texts = "training texts" if info["texts"] == "training" else info["texts"]
    for name in GENSIM_MEASURES:
        if name not in info["per_topic"]:
            continue
        value = result[name]
        shown = "n/a" if value is None else f"{value:.4f}"
        window = info["windows"][name]
        unit = "documents" if WINDOW[name] == 0 else f"windows of {WINDOW[name]}"
        click.echo(f"{name + ':':<13}{shown}  (top {info['top']}, {texts}, {window:,} {unit})")
        if name == "c_v":
            click.echo(f"             caveat: {C_V_CAVEAT}")
    absent = info["absent_words"]
    if absent:
        listed = ", ".join(sorted(absent)[:10]) + (", ..." if len(absent) > 10 else "")
        click.echo(f"absent:      {len(absent)} top word(s) never occur in the {texts}, left "
                   f"out of their topics: {listed}")
