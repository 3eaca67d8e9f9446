"""The Gibbs samplers' resume rules: a run trained before a default changed continues the
chain it was sampling, whatever the default is now (docs/train.md, "Resuming")."""
from __future__ import annotations

import logging
from typing import Callable

log = logging.getLogger("topictk")


def keep_saved_settings(config, arrays: dict, saved: dict,
                        reads: Callable[[object, dict], bool],
                        sampler_then: Callable[[object], str | None]):
    """``config`` made to continue the saved run (``saved``: its config.yaml, ``arrays``: its
    state): the schedule it sampled by (:func:`keep_saved_chunks`); its sampler, for a run
    trained with ``sampler: auto`` before auto could pick WarpLDA (``reads(config, arrays)``:
    whether the counts ``config`` picks read the saved arrays; else ``sampler_then(config)``
    is the sampler auto picked then, §2.9); how its blocks saw n_k
    (:func:`keep_saved_block_sync`); and, for an HDP run, its moves
    (:func:`keep_saved_moves`)."""
    config = keep_saved_defaults(keep_saved_chunks(config, saved), saved)
    config = keep_saved_block_sync(config, saved)
    if not reads(config, arrays):
        data = config.to_dict()
        data["inference"]["sampler"] = sampler_then(config)
        log.info("the run was trained with inference.sampler: auto = %s; it continues so",
                 data["inference"]["sampler"] or "as inference.sparse")
        config = type(config)(data, config.source)
    return keep_saved_moves(config, saved)


def keep_saved_chunks(config, saved: dict):
    """A run whose saved settings ``saved`` sample by ``inference.chunks: auto`` (AD-LDA, the
    default of runs trained before ``inference.blocks``) continues so when ``config`` sets
    neither key (which now means the partitioned schedule)."""
    inference = config.inference
    if inference.chunks is not None or inference.blocks not in (None, "auto"):
        return config
    before = saved.get("inference")
    if not isinstance(before, dict) or before.get("chunks") != "auto":
        return config
    log.info("the run samples by AD-LDA chunks (inference.chunks: auto); it continues so")
    data = config.to_dict()
    data["inference"]["chunks"] = "auto"
    return type(config)(data, config.source)


#: defaults that changed: (section, key) -> (the default runs were saved with, the default now)
CHANGED_DEFAULTS = {("inference", "sampler"): (None, "auto"),
                    ("inference", "blocks"): (None, "auto")}


def keep_saved_defaults(config, saved: dict):
    """A run saved with a setting's earlier default (CHANGED_DEFAULTS) continues with it when
    ``config`` has the default of today: the chain it was sampling."""
    data = None
    for (section, key), (before, now) in CHANGED_DEFAULTS.items():
        part = saved.get(section)
        # a run saved before the key existed ran as its earliest default
        if (not isinstance(part, dict) or part.get(key, before) != before
                or getattr(getattr(config, section), key, before) != now):
            continue
        data = data or config.to_dict()
        data[section][key] = before
        log.info("the run was trained with %s.%s: %s, the default then; it continues so",
                 section, key, "null" if before is None else before)
    return config if data is None else type(config)(data, config.source)


def keep_saved_block_sync(config, saved: dict):
    """A run trained before ``inference.block_sync`` (its saved config.yaml has an inference
    section without it) continues with n_k taken at every epoch, the schedule it sampled by."""
    before = saved.get("inference")
    if (not isinstance(before, dict) or "block_sync" in before
            or getattr(config.inference, "block_sync", None) in (None, "epoch")):
        return config
    log.info("the run was trained before inference.block_sync; it continues with n_k taken "
             "at every epoch (inference.block_sync: epoch)")
    data = config.to_dict()
    data["inference"]["block_sync"] = "epoch"
    return type(config)(data, config.source)


def keep_saved_moves(config, saved: dict):
    """An HDP run trained before ``model.split_merge`` existed (its saved config.yaml has a
    model section without it) continues its chain without the moves."""
    model = saved.get("model")
    if (getattr(config.model, "family", "lda") != "hdp" or not isinstance(model, dict)
            or "split_merge" in model):
        return config
    log.info("the run was trained before model.split_merge; it continues without the moves "
             "(model.split_merge: 0)")
    data = config.to_dict()
    data["model"]["split_merge"] = 0
    return type(config)(data, config.source)
