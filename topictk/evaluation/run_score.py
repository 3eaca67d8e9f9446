"""The run's score as ``topictk topics`` heads its output with it: ``evaluate``'s held-out
perplexity when the run's ``scores.json`` holds it (:mod:`topictk.evaluation.scores`), read
without loading the model; otherwise a line saying it is not computed and the command that
computes it, or, when asked, computed (and cached) here.

The in-training estimates of ``metrics.jsonl`` are never shown as the run's score: they are
measured on some test documents with a short fold-in (docs/evaluate.md).
"""
from __future__ import annotations

import shlex
from pathlib import Path

from topictk.evaluation.scores import (cache_key, lookup, protocol_line, run_scores,
                                       theta_estimator)


def evaluate_command(run_dir: Path, checkpoint: int | None) -> str:
    """The command that computes and caches the score of this model."""
    command = f"topictk evaluate {shlex.quote(str(run_dir))}"
    return command if checkpoint is None else f"{command} --checkpoint {checkpoint}"


def run_score(run_dir: str | Path, config, checkpoint: int | None = None, *,
              compute: bool = False, loaded=None) -> dict:
    """The held-out perplexity of a run's model (final, or ``checkpoint``) as ``evaluate``
    gives it.

    Parameters
    ----------
    run_dir : str or Path
    config : topictk.config.Config
        The run's config.
    checkpoint : int, optional
    compute : bool
        Compute (and cache) it when ``scores.json`` does not hold it; otherwise it is only
        read.
    loaded : LoadedRun, optional
        The run already loaded, used when computing.

    Returns
    -------
    dict
        ``perplexity`` (None when not computed, or the store has no held-out tokens),
        ``computed``, ``cached`` (read from scores.json), ``heldout_tokens``, ``protocol``
        (how evaluate scores, one line, naming the estimator of theta), ``estimator`` (that
        estimator: gibbs, mh, fixed-point or the family's own), ``model`` and ``command``
        (that computes it).
    """
    run_dir = Path(run_dir)
    out = {"perplexity": None, "computed": False, "cached": False, "heldout_tokens": None,
           "protocol": protocol_line(config), "estimator": theta_estimator(config),
           "model": "model.npz" if checkpoint is None else f"checkpoint {checkpoint}",
           "command": evaluate_command(run_dir, checkpoint)}
    if compute:
        result = run_scores(run_dir, config, checkpoint, loaded=loaded)
    else:
        hit = lookup(run_dir, cache_key(run_dir, config, checkpoint))
        if hit is None:
            return out
        result = {**hit["result"], "cached": True}
    # a store without test documents (Protocol B): the training documents' held-out tokens
    ppl = result.get("perplexity")
    if ppl is None:
        ppl = result.get("perplexity_train_heldout")
    out.update(perplexity=ppl, computed=True, cached=bool(result.get("cached")),
               heldout_tokens=result.get("heldout_tokens"))
    return out


def score_line(score: dict) -> str:
    """One line: "held-out perplexity 2,330.7 (evaluate: document completion on all 7,484
    test documents, ...; 101,017 held-out tokens)", or that it is not computed and how."""
    if not score["computed"]:
        return (f"held-out perplexity: not computed ({score['protocol']}); "
                f"'{score['command']}' computes it, or add --score")
    if score["perplexity"] is None:
        return "held-out perplexity: n/a, the corpus store has no held-out tokens"
    tokens = score.get("heldout_tokens")
    counted = f"; {int(tokens):,} held-out tokens" if tokens else ""
    return f"held-out perplexity {score['perplexity']:,.1f} ({score['protocol']}{counted})"


__all__ = ["evaluate_command", "run_score", "score_line"]
