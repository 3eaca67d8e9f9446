"""gensim's coherence measures of a run (``evaluate --coherence``), computed once per model and
measure and kept in the run's ``scores.json`` beside its held-out score.

c_v on a large corpus counts windows of 110 tokens over every training text; asking for it
again (``evaluate --coherence``, :meth:`topictk.api.Run.evaluate`,
:func:`topictk.api.compare_runs`) reads the number back. An entry is keyed by what the
number depends on: the model scored (the files of :func:`topictk.evaluation.scores.cache_key`:
model, samples, store, model and inference settings, topictk's version), the measure, its
window, the top-N words per topic, and the texts (the run's store, or the ``--reference``
store by its ``corpus_id`` and vocabulary hash, which change with its content). The held-out
protocol (fold-in settings) is not part of it: it does not change a coherence.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from topictk.evaluation.coherence import WINDOW
from topictk.evaluation.scores import _store_identity, cache_key, lookup, store

ESTIMATOR = "gensim coherence"


def coherence_key(run_dir: Path, config, checkpoint: int | None, measure: str, top: int,
                  reference: str | Path | None) -> dict | None:
    """What a cached value of ``measure`` must match (None when the model file is missing)."""
    key = cache_key(run_dir, config, checkpoint)
    if key is None:
        return None
    texts = ({"texts": "training"} if reference is None
             else {"texts": "reference", **_store_identity(Path(reference))})
    key["protocol"] = {"estimator": ESTIMATOR, "measure": measure, "window": WINDOW[measure],
                       "top": int(top), **texts}
    return key


def cached_coherence(run_dir: str | Path, config, checkpoint: int | None,
                     measures: Sequence[str], top: int, reference: str | Path | None,
                     compute: Callable[[Sequence[str]], dict], *,
                     recompute: bool = False) -> dict:
    """The result fields of gensim's ``measures`` (those of
    :func:`topictk.evaluation.run.gensim_coherence_of`: each measure's mean under its name,
    and ``coherence``), read from ``scores.json`` for the measures it holds and computed by
    ``compute(missing measures)`` for the others, which are cached (unless the folder cannot
    be written). ``top``: the top words per topic; ``recompute``: compute them all again."""
    run_dir = Path(run_dir)
    keys = {m: coherence_key(run_dir, config, checkpoint, m, top, reference) for m in measures}
    found = {}
    if not recompute:
        for m, key in keys.items():
            hit = lookup(run_dir, key)
            if hit is not None:
                found[m] = hit["result"]
    missing = [m for m in measures if m not in found]
    if missing:
        fresh = compute(missing)
        info = fresh["coherence"]
        for m in missing:
            found[m] = {"mean": fresh[m], "per_topic": info["per_topic"][m],
                        "windows": info["windows"][m], "absent_words": info["absent_words"],
                        "texts": info["texts"], "top": info["top"]}
            # the model scored is the one the key was read from (not rewritten meanwhile)
            if keys[m] is not None and keys[m] == coherence_key(run_dir, config, checkpoint, m,
                                                                top, reference):
                store(run_dir, keys[m], {"result": found[m]})
    first = found[measures[0]]
    result = {m: found[m]["mean"] for m in measures}
    result["coherence"] = {"texts": first["texts"], "top": first["top"],
                           "windows": {m: found[m]["windows"] for m in measures},
                           "per_topic": {m: found[m]["per_topic"] for m in measures},
                           "absent_words": first["absent_words"],
                           "cached": [m for m in measures if m not in missing]}
    return result


__all__ = ["cached_coherence", "coherence_key"]
