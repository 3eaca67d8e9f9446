"""Shared pytest configuration: the seed fixture and the report header.

Seed contract (scikit-learn's ``global_random_seed``): every test that takes the ``seed``
fixture must pass for *any* seed. The default run uses one seed; choose others with the
``TOPICTK_TEST_SEED`` environment variable::

    TOPICTK_TEST_SEED=7 python -m pytest tests/kernels        # one seed
    TOPICTK_TEST_SEED=0-9 python -m pytest tests/kernels      # a range (inclusive)
    TOPICTK_TEST_SEED=all python -m pytest tests/kernels      # seeds 0..19
"""
from __future__ import annotations

import os
import platform
import signal

import numpy as np
import pytest
import scipy

# The Ctrl-C tests act as a person at a terminal, whose commands start with SIGINT at its
# default disposition. A shell starts background jobs with SIGINT ignored (`pytest &` in a
# script, many CI runners), and children inherit that; a handled signal is reset to the
# default at exec, so handling it here gives every command the tests start the terminal's
# disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_ENV = "TOPICTK_TEST_SEED"
_DEFAULT_SEED = 0


def _seeds_from_env() -> list[int]:
    raw = os.environ.get(_ENV, "").strip()
    if not raw:
        return [_DEFAULT_SEED]
    if raw == "all":
        return list(range(20))
    try:
        if "-" in raw:
            low, high = (int(part) for part in raw.split("-", 1))
            if low > high or low < 0:
                raise ValueError
            return list(range(low, high + 1))
        value = int(raw)
        if value < 0:
            raise ValueError
        return [value]
    except ValueError:
        raise pytest.UsageError(f"{_ENV} must be a seed >= 0, a range A-B or 'all'; got {raw!r}")


SEEDS = _seeds_from_env()


@pytest.fixture(params=SEEDS, ids=lambda s: f"seed{s}")
def seed(request) -> int:
    """A random seed; tests using it must pass whatever its value (see module docstring)."""
    return request.param


@pytest.fixture
def set_umask():
    """``set_umask(mask)`` sets the process umask (and topictk's cached copy) for the test;
    the umask of before is restored afterwards."""
    from topictk import _fileio

    before = os.umask(0o022)
    os.umask(before)

    def apply(mask: int) -> None:
        os.umask(mask)
        _fileio.umask.cache_clear()

    yield apply
    os.umask(before)
    _fileio.umask.cache_clear()


def pytest_report_header(config) -> list[str]:
    return [
        f"topictk: seed(s) {SEEDS}; numpy {np.__version__}, scipy {scipy.__version__}, "
        f"python {platform.python_version()}",
        f"topictk: reproduce with {_ENV}={SEEDS[0]} python -m pytest <test id> -p no:cacheprovider "
        f"(bitwise kernel tests assume this numpy version)",
    ]
