"""Every module under topictk imports on its own: each one is the first topictk module imported
by its interpreter, so no module relies on another having been imported first.

A fresh interpreter per module costs about a second each (NumPy and SciPy are imported every
time), so one helper interpreter imports the third-party dependencies only and then forks a
child per topictk module; the parent checks that it has not imported any topictk module itself.
"""
from __future__ import annotations

import os
import pkgutil
import subprocess
import sys

import pytest

import topictk
from tests.integration._cli import REPO

HELPER = r"""
import importlib, os, sys, traceback, warnings
for dep in ("numpy", "scipy", "scipy.special", "scipy.sparse", "scipy.optimize", "scipy.stats",
            "click", "yaml", "tqdm"):
    try:
        importlib.import_module(dep)
    except ImportError:
        pass
assert not [m for m in sys.modules if m == "topictk" or m.startswith("topictk.")]
failed = 0
for name in sys.argv[1:]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = 0
        try:
            warnings.simplefilter("error")
            importlib.import_module(name)
        except BaseException:
            os.write(write_end, traceback.format_exc().encode())
            code = 1
        os._exit(code)
    os.close(write_end)
    chunks = []
    while True:
        block = os.read(read_end, 65536)
        if not block:
            break
        chunks.append(block)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failed += 1
        text = b"".join(chunks).decode(errors="replace").strip().splitlines()
        print(f"{name}: {text[-1] if text else 'exit status ' + str(status)}")
    else:
        print(f"{name}: ok")
sys.exit(1 if failed else 0)
"""


def _module_names() -> list[str]:
    names = ["topictk"]
    for info in pkgutil.walk_packages(topictk.__path__, prefix="topictk."):
        names.append(info.name)
    return sorted(names)


def test_module_list_covers_the_package():
    names = _module_names()
    for expected in ("topictk.cli", "topictk.cli.train", "topictk.inference.gibbs._gibbs",
                     "topictk._cy.special", "topictk.corpus.store", "topictk.training.run",
                     "topictk.evaluation.coherence", "topictk.__main__"):
        assert expected in names


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_every_module_imports_on_its_own():
    names = _module_names()
    proc = subprocess.run([sys.executable, "-c", HELPER, *names], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    report = proc.stdout.splitlines()
    failures = [line for line in report if not line.endswith(": ok")]
    assert not failures and proc.returncode == 0, "\n".join(failures) + proc.stderr
    assert len(report) == len(names)
