"""README's test command installs only when needed (tests/install_if_needed.py): what makes
an install out of date, what is left alone, and that CI runs the README's command itself."""
from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from tests import install_if_needed as iin

ROOT = Path(__file__).resolve().parents[2]
SUFFIX = ".cpython-test.so"
PYPROJECT = """[project]
name = "topictk"
dependencies = ["numpy>=2"]

[tool.ruff]
line-length = 100

[[tool.importlinter.contracts]]
name = "layers"
"""


def _touch(path: Path, at: float, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(text)
    os.utime(path, (at, at))
    return path


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A checkout with two kernels (one cimports a shared .pxd), each built after its sources."""
    root = tmp_path / "repo"
    _touch(root / "pyproject.toml", 100, PYPROJECT)
    _touch(root / "setup.py", 100, "setup()\n")
    _touch(root / "topictk" / "_cy" / "rng.pxd", 100)
    for kernel in ("topictk/_cy/special", "topictk/inference/gibbs/_gibbs"):
        _touch(root / f"{kernel}.pyx", 100)
        _touch(root / f"{kernel}{SUFFIX}", 200)
    return root


def _install(root: Path, **changes) -> iin.Install:
    fields = {"checkout": root.resolve(), "digest": iin.build_digest(root), "missing": []}
    return iin.Install(**{**fields, **changes})


def test_an_install_built_after_its_sources_is_up_to_date(checkout):
    assert iin.stale(checkout, _install(checkout), SUFFIX) == []


@pytest.mark.parametrize("install, expected", [
    (None, "topictk is not installed in this environment"),
    ({"checkout": None}, "not as an editable install of a checkout"),
    ({"checkout": Path("/elsewhere")}, "topictk is installed from /elsewhere, not from"),
    ({"digest": None}, "topictk was not installed by this script"),
    ({"digest": "0" * 64}, "setup.py or pyproject.toml differ from those of the last install"),
    ({"missing": ["pytest", "hypothesis"]}, "not installed: pytest, hypothesis"),
])
def test_what_this_environment_holds_decides(checkout, install, expected):
    install = None if install is None else _install(checkout, **install)
    reasons = iin.stale(checkout, install, SUFFIX)
    assert len(reasons) == 1 and expected in reasons[0], reasons


def test_a_kernel_changed_after_its_build_is_built_again(checkout):
    _touch(checkout / "topictk/inference/gibbs/_gibbs.pyx", 300)
    assert iin.stale(checkout, _install(checkout), SUFFIX) == [
        f"topictk/inference/gibbs/_gibbs{SUFFIX} is older than "
        f"topictk/inference/gibbs/_gibbs.pyx"]


def test_a_changed_header_makes_every_kernel_stale(checkout):
    _touch(checkout / "topictk/_cy/rng.pxd", 300)
    reasons = iin.stale(checkout, _install(checkout), SUFFIX)
    assert len(reasons) == 2 and all(r.endswith("is older than topictk/_cy/rng.pxd")
                                     for r in reasons)


def test_a_kernel_without_its_module_for_this_python_is_built(checkout):
    (checkout / f"topictk/_cy/special{SUFFIX}").rename(checkout / "topictk/_cy/special.other.so")
    assert iin.stale(checkout, _install(checkout), SUFFIX) == [
        f"topictk/_cy/special{SUFFIX} is not built"]


def test_the_settings_of_the_tools_are_not_part_of_the_build(checkout):
    before = iin.build_digest(checkout)
    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(PYPROJECT.replace("line-length = 100", "line-length = 120")
                         + '\n[tool.pytest.ini_options]\naddopts = "-ra"\n')
    assert iin.build_digest(checkout) == before
    pyproject.write_text(PYPROJECT.replace('"numpy>=2"', '"numpy>=2", "scipy"'))
    assert iin.build_digest(checkout) != before
    pyproject.write_text(PYPROJECT)
    (checkout / "setup.py").write_text("setup(options={})\n")
    assert iin.build_digest(checkout) != before


def test_the_requirements_read_are_the_package_s_and_its_test_extra():
    class Dist:
        requires = ["numpy>=2", 'pytest>=8; extra == "test"', "dask[distributed]>=2024.1 ; "
                    "extra == 'test'", 'matplotlib>=3.7; extra == "plot"',
                    'tomli; python_version < "3.11"', 'x; extra == "test" and os_name == "nt"']

    assert iin.required(Dist(), "test") == ["numpy", "pytest", "dask"]


def test_this_test_run_s_install_is_read(monkeypatch):
    """The environment these tests run in: an editable install of this checkout with every
    requirement of the test extra (as the README's command makes it)."""
    install = iin.installed()
    assert install is not None and install.checkout == ROOT and install.missing == []
    monkeypatch.setattr(iin.metadata, "distribution", _without("hypothesis"))
    assert iin.installed().missing == ["hypothesis"]


def _without(name):
    real = iin.metadata.distribution

    def distribution(wanted):
        if wanted == name:
            raise iin.metadata.PackageNotFoundError(wanted)
        return real(wanted)
    return distribution


@pytest.mark.parametrize("up_to_date", [True, False])
def test_pip_runs_only_when_needed_and_the_build_is_recorded(monkeypatch, tmp_path, up_to_date,
                                                             capsys):
    calls = []
    monkeypatch.setattr(iin, "stale", lambda root, install, suffix:
                        [] if up_to_date else ["topictk is not installed in this environment"])
    monkeypatch.setattr(iin, "import_errors", lambda root: [])
    monkeypatch.setattr(iin.subprocess, "call", lambda cmd, cwd: calls.append((cmd, cwd)) or 0)
    monkeypatch.setattr(iin.sys, "prefix", str(tmp_path))
    assert iin.main([]) == 0
    if up_to_date:
        assert calls == [] and not (tmp_path / iin.STAMP).exists()
        assert "up to date; nothing to build" in capsys.readouterr().err
    else:
        assert calls == [([iin.sys.executable, "-m", "pip", "install", "-e", ".[test]"], ROOT)]
        assert (tmp_path / iin.STAMP).read_text().strip() == iin.build_digest(ROOT)
        assert "installing: topictk is not installed" in capsys.readouterr().err
    assert iin.main(["--check"]) == (0 if up_to_date else 1)
    assert len(calls) == (0 if up_to_date else 1)


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("**Run the tests**", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = block.strip().splitlines()
    assert len(lines) == 1, "README's test command is one line a user can paste"
    return lines[0]


def test_ci_runs_the_readme_test_command_as_written():
    command = _readme_test_command()
    assert "tests/install_if_needed.py" in shlex.split(command)
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in (line.strip() for line in ci_lines)
