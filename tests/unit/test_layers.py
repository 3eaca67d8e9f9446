"""The import contracts of pyproject.toml ([tool.importlinter]) hold: no package imports one
above it (cli > training | evaluation > inference > state | corpus | config | rundir > streams |
_fileio | errors), and no driver module imports another except the one it extends."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
