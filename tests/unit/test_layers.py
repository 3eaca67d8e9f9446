"""The import contracts of pyproject.toml ([tool.importlinter]) hold: no package imports one
above it (cli > training | evaluation > inference > state | corpus | config | rundir > streams |
_fileio | errors), no driver module imports another except the one it extends, no family of
topictk/inference/ (a subpackage) imports another except the driver it extends, and the modules
beside the families import none of them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INFERENCE = REPO / "topictk" / "inference"

# in a child process: import-linter configures logging with dictConfig, which would disable
# the loggers of this process that other tests capture
CHECK = ("import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")


def test_import_contracts_hold():
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 kept, 0 broken" in done.stdout, done.stdout


def test_every_driver_module_is_in_the_independence_contract():
    """pyproject.toml cannot be generated at build time, so this test is the declared source
    of truth: the modules of the driver independence contract are exactly the modules the
    registry (topictk.inference.registry.ALGORITHMS) imports drivers from."""
    listed = set(_contract("a driver module imports no other driver module")["modules"])
    registered = _built_in_driver_modules()
    assert not registered - listed, (
        f"driver modules missing from the independence contract of pyproject.toml "
        f"([[tool.importlinter.contracts]] 'a driver module imports no other driver module'): "
        f"{', '.join(sorted(registered - listed))}; add them to its modules")
    assert not listed - registered, (
        f"the independence contract of pyproject.toml lists modules that register no "
        f"algorithm: {', '.join(sorted(listed - registered))}; remove them")


def _contracts() -> list[dict]:
    tomllib = pytest.importorskip("tomllib")     # Python 3.11+
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["importlinter"]["contracts"]


def _contract(name_start: str) -> dict:
    (found,) = [c for c in _contracts() if c["name"].startswith(name_start)]
    return found


def _built_in_driver_modules() -> set[str]:
    """The modules the registry imports the package's drivers from (not those of algorithms
    registered from outside the package, see register_algorithm)."""
    from topictk.inference.registry import ALGORITHMS

    return {module for module in ALGORITHMS.values() if module.startswith("topictk.")}


def _families() -> set[str]:
    """The family packages: every folder of topictk/inference/ with an __init__.py."""
    return {f"topictk.inference.{path.parent.name}" for path in INFERENCE.glob("*/__init__.py")}


def _shared_modules() -> set[str]:
    """The Python modules beside the families, at the top of topictk/inference/."""
    return {f"topictk.inference.{path.stem}" for path in INFERENCE.glob("*.py")
            if path.stem != "__init__"}


def test_every_family_folder_is_in_the_family_contracts():
    """A new family is a new folder of topictk/inference/; the contracts that keep families apart
    and keep the shared modules below them must name it, and name no folder that is gone."""
    families = _families()
    assert families >= {"topictk.inference.gibbs", "topictk.inference.variational"}
    independent = set(_contract("a family imports no other family")["modules"])
    assert independent == families, (
        f"pyproject.toml's contract 'a family imports no other family' should list exactly "
        f"the folders of topictk/inference/: add {sorted(families - independent)}, remove "
        f"{sorted(independent - families)}")
    forbidden = _contract("the shared modules of inference import no family")
    assert set(forbidden["forbidden_modules"]) == families
    shared = set(forbidden["source_modules"])
    assert shared == _shared_modules(), (
        f"pyproject.toml's contract 'the shared modules of inference import no family' should "
        f"list every module at the top of topictk/inference/: add "
        f"{sorted(_shared_modules() - shared)}, remove {sorted(shared - _shared_modules())}")


def test_every_driver_module_lives_in_a_family_folder():
    """The registry imports every built-in driver from a family's folder, never from a module
    beside the families."""
    families = _families()
    for module in sorted(_built_in_driver_modules()):
        assert module.rsplit(".", 1)[0] in families, f"{module} is not in a family folder"
