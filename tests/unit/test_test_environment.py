"""What the test run itself promises: the browser tests skip without chromium on a person's
machine and fail without it in CI; the commands the tests start get SIGINT at its default
disposition even when the test run was started with SIGINT ignored (tests/conftest.py)."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration._chromium import MISSING, find_chromium, in_ci

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def empty_path(tmp_path, monkeypatch) -> Path:
    """PATH is one empty folder: no chromium on it."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


@pytest.mark.parametrize("ci", [None, "", "0", "false", "No"])
def test_without_chromium_the_browser_tests_skip_outside_ci(empty_path, monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="^no chromium on PATH") as skipped:
        find_chromium()
    assert str(skipped.value) == MISSING and "\n" not in MISSING


@pytest.mark.parametrize("ci", ["1", "true", "True", "yes"])
def test_without_chromium_the_browser_tests_fail_in_ci(empty_path, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(BaseException) as stopped:      # a skip, too, would be caught here
        find_chromium()
    assert stopped.type is pytest.fail.Exception
    assert str(stopped.value) == f"{MISSING}; CI is set, so the browser tests may not be skipped"


@pytest.mark.parametrize("name", ["chromium", "chromium-browser"])
@pytest.mark.parametrize("ci", [None, "true"])
def test_chromium_on_path_is_used_in_and_outside_ci(empty_path, monkeypatch, name, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    executable = empty_path / name
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o644)                     # not executable: not a chromium
    with pytest.raises((pytest.skip.Exception, pytest.fail.Exception)):
        find_chromium()
    executable.chmod(0o755)
    assert find_chromium() == str(executable)


def test_ci_is_read_from_the_environment_given():
    assert in_ci({"CI": "true"}) and in_ci({"CI": "1"}) and in_ci({"CI": "github"})
    assert not in_ci({}) and not in_ci({"CI": " "}) and not in_ci({"CI": "FALSE"})


# ---------------------------------------------------------------- SIGINT of started commands

_DISPOSITION = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_command_started_by_a_test_has_sigint_at_its_default():
    """As the Ctrl-C tests start topictk (a Python child of this process); this test is also
    run by the next one in a pytest started with SIGINT ignored."""
    started = subprocess.run([sys.executable, "-c", _DISPOSITION], capture_output=True,
                             text=True, check=True)
    assert started.stdout.strip() == "False"


def test_a_test_run_started_with_sigint_ignored_gives_its_commands_the_default():
    """A background job of a shell (``pytest &``, ``bash -c "trap '' INT; pytest"``, many CI
    runners) starts with SIGINT ignored, and its children would inherit that."""
    inherited = subprocess.run([sys.executable, "-c", _DISPOSITION], capture_output=True,
                               text=True, check=True, preexec_fn=_ignore_sigint)
    assert inherited.stdout.strip() == "True"      # what tests/conftest.py has to undo
    test = f"{Path(__file__).relative_to(ROOT)}::" \
           f"{test_a_command_started_by_a_test_has_sigint_at_its_default.__name__}"
    inner = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            test], cwd=ROOT, capture_output=True, text=True,
                           preexec_fn=_ignore_sigint, timeout=300)
    assert inner.returncode == 0, inner.stdout[-2000:] + inner.stderr[-2000:]
    assert "1 passed" in inner.stdout
