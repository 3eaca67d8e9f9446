"""Fixtures for the command-line tests: the example corpus prepared once per session."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration._cli import EXAMPLE, ok


@pytest.fixture(scope="session")
def example_store(tmp_path_factory) -> Path:
    """The bundled example corpus (341 documents) prepared once: 10 % test documents."""
    out = tmp_path_factory.mktemp("example") / "store"
    outcome = ok("prepare", EXAMPLE, "--out", out)
    assert "documents:    307 train, 34 test (341 read" in outcome.stdout
    return out


@pytest.fixture(scope="session")
def other_store(tmp_path_factory) -> Path:
    """The same text with another split seed: a different corpus store."""
    out = tmp_path_factory.mktemp("other") / "store"
    ok("prepare", EXAMPLE, "--out", out, "--seed", "9")
    return out
