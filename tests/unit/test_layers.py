"""The import contracts of pyproject.toml ([tool.importlinter]) hold: no package imports one
above it (cli > training | evaluation > inference > state | corpus | config | rundir > streams |
_fileio | errors), and no driver module imports another except the one it extends."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# in a child process: import-linter configures logging with dictConfig, which would disable
# the loggers of this process that other tests capture
CHECK = ("import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")


def test_import_contracts_hold():
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout, done.stdout


def test_every_driver_module_is_in_the_independence_contract():
    """pyproject.toml cannot be generated at build time, so this test is the declared source
    of truth: the modules of the driver independence contract are exactly the modules the
    registry (topictk.inference.registry.ALGORITHMS) imports drivers from."""
    tomllib = pytest.importorskip("tomllib")     # Python 3.11+

    from topictk.inference.registry import ALGORITHMS

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    listed = {module for contract in contracts if contract["type"] == "independence"
              for module in contract["modules"]}
    registered = set(ALGORITHMS.values())
    assert not registered - listed, (
        f"driver modules missing from the independence contract of pyproject.toml "
        f"([[tool.importlinter.contracts]] 'a driver module imports no other driver module'): "
        f"{', '.join(sorted(registered - listed))}; add them to its modules")
    assert not listed - registered, (
        f"the independence contract of pyproject.toml lists modules that register no "
        f"algorithm: {', '.join(sorted(listed - registered))}; remove them")
