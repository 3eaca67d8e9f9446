"""The import contracts of pyproject.toml ([tool.importlinter]) hold: no package imports one
above it (cli > training | evaluation > inference > state | corpus | config | rundir > streams |
_fileio | errors), and no driver module imports another except the one it extends."""
from __future__ import annotations

from pathlib import Path

from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[2]


def test_import_contracts_hold(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    code = lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True,
                        no_logo=True)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 kept, 0 broken" in out, out
