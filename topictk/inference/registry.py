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
        from topictk.inference import hsvg, sgrld  # noqa: F401
        from topictk.inference import cvb, ovb, vb  # noqa: F401  (vb, cvb, cvb0, ovb)
        from topictk.inference import dmr, pem  # noqa: F401  (dmr-sem, dmr-sgrld, pem)
        from topictk.inference import dlda  # noqa: F401  (tlasgr, tlfsgr, dlda-sgrld, dlda-gibbs)
        _LOADED = True


def algorithm_names() -> list[str]:
    _load()
    return sorted(_DRIVERS)


def get_driver(name: str) -> type[Driver]:
    _load()
    return _DRIVERS[name]
