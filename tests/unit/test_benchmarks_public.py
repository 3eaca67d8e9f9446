"""The benchmarks use topictk through its command line and its public Python API only, so that
a change of topictk's internals cannot break them silently: every ``benchmarks/*.py`` module
imports (without running) and names no topictk module other than ``topictk``,
``topictk.api`` and ``topictk.cli``, and no name ``topictk`` does not export. Studies
(``benchmarks/studies/``) may use internals and are not checked."""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

import topictk

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
MODULES = sorted(BENCHMARKS.glob("*.py"))
PUBLIC_MODULES = {"topictk", "topictk.api", "topictk.cli"}
# a dotted topictk module in code or text, e.g. "topictk.inference.gibbs.driver"
DOTTED = re.compile(r"\btopictk\.([A-Za-z_][A-Za-z0-9_]*)")


def _private_uses(source: str) -> list[str]:
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if a.name.split(".")[0] == "topictk" and a.name not in PUBLIC_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] != "topictk":
                continue
            if node.module not in PUBLIC_MODULES:
                found.append(node.module)
            elif node.module == "topictk":
                found += [f"topictk.{a.name}" for a in node.names
                          if a.name not in (*topictk.__all__, "__version__", "api", "cli")]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "topictk" and node.attr not in (*topictk.__all__,
                                                                      "__version__", "api",
                                                                      "cli"):
            found.append(f"topictk.{node.attr}")
    # module paths in strings (importlib, "python -m ...", subprocess code)
    for match in DOTTED.finditer(source):
        name = match.group(1)
        if name not in ("api", "cli", "py", *topictk.__all__):
            found.append(match.group(0))
    return sorted(set(found))


def test_the_benchmark_scripts_are_found():
    names = {p.name for p in MODULES}
    assert {"harness.py", "bench_gibbs.py", "bench_dmr.py"} <= names
    assert not (BENCHMARKS / "_results.py").exists()


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_benchmark_uses_public_topictk_only(path):
    assert _private_uses(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_benchmark_imports(path, monkeypatch):
    """Importing runs no benchmark (work happens under ``if __name__ == "__main__"``) and
    finds every name it imports at module level, topictk's included."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop("harness", None)
    assert callable(getattr(module, "main", None)) or path.name == "harness.py"


def test_the_check_catches_private_imports():
    assert "topictk.inference.gibbs.driver" in _private_uses(
        "from topictk.inference.gibbs.driver import GibbsDriver\n")
    assert "topictk.rundir.checkpoint" in _private_uses("import topictk.rundir.checkpoint\n")
    assert _private_uses("from topictk import streams\n") == ["topictk.streams"]
    assert _private_uses("x = topictk.corpus\n") == ["topictk.corpus"]
    assert _private_uses("cmd = 'import topictk.training.run'\n") == ["topictk.training"]
    assert _private_uses("from topictk import api, load_run\n") == []
    assert _private_uses("import topictk\nrun = topictk.load_run(p)\n") == []


def test_results_are_written_whole_keeping_hand_written_notes(tmp_path, monkeypatch):
    """A script's report replaces its results file; notes after the marker are kept."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import harness

    sys.modules.pop("harness", None)
    path = tmp_path / "results" / "gibbs.md"
    harness.write_results(path, "# Gibbs\n\nold table\n")
    assert path.read_text() == "# Gibbs\n\nold table\n"
    path.write_text(path.read_text() + f"\n{harness.NOTES_MARKER}\n\nkept, by hand\n")
    harness.write_results(path, "# Gibbs\n\nnew table")
    assert path.read_text() == (f"# Gibbs\n\nnew table\n\n{harness.NOTES_MARKER}\n\n"
                                "kept, by hand\n")
    assert [p.name for p in path.parent.iterdir()] == ["gibbs.md"]
    assert harness.results_path("gibbs", record=True) == BENCHMARKS / "results" / "gibbs.md"
    assert harness.results_path("gibbs", record=False).parent == BENCHMARKS / "work" / "results"
