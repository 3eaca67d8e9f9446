"""Algorithm name -> driver class."""
from __future__ import annotations

from topictk.inference.base import Driver

_DRIVERS: dict[str, type[Driver]] = {}
_LOADED = False


def register(cls: type[Driver]) -> type[Driver]:
    """Class decorator: make ``cls`` available as ``inference.algorithm: cls.name``."""
    _DRIVERS[cls.name] = cls
    return cls


def _load() -> None:
    global _LOADED
    if not _LOADED:
        from topictk.inference import gibbs  # noqa: F401  (registers its driver)
        _LOADED = True


def algorithm_names() -> list[str]:
    _load()
    return sorted(_DRIVERS)


def get_driver(name: str) -> type[Driver]:
    _load()
    return _DRIVERS[name]
