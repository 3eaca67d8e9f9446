"""topictk: topic models from the command line.

Prepare a corpus once (``topictk prepare``), train any inference algorithm on it from a YAML
experiment (``topictk train``), and score every run on the same held-out tokens
(``topictk evaluate``). From Python, as in a notebook: :func:`prepare` a store from files or
from documents in memory (a list of texts, records, a pandas DataFrame), :func:`train` a
config file or dict on it (the command's engine: the same run directory and numbers), and
read, score and continue the :class:`Run` it returns; :func:`load_run`, :func:`open_store`,
:func:`score_topic_word`, :func:`fold_in`, :func:`coherence`, :func:`compare_runs` and
:func:`intrusion_precision` (:mod:`topictk.api`, docs/python.md), imported on first use so
that ``import topictk`` stays light.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["Run", "coherence", "compare_runs", "fold_in", "intrusion_precision", "load_run",
           "open_store", "prepare", "score_slice_topics", "score_topic_word", "train"]


def __getattr__(name: str):
    if name in __all__:
        from topictk import api

        return getattr(api, name)
    raise AttributeError(f"module 'topictk' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
