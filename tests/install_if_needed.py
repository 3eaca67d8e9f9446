"""Install topictk for its tests only when this environment lacks it or holds an older build.

README's test command runs it before ``pytest``, so that a second run of that command does
not compile every kernel again, as ``pip install -e`` does each time (it builds in a fresh
temporary folder, with build isolation or without)::

    python tests/install_if_needed.py            # install if needed, else say why not
    python tests/install_if_needed.py --check    # only say whether it is needed (exit 1 if so)
    python tests/install_if_needed.py --force    # install in any case

The installed project is up to date when

- topictk is installed in this environment as an editable install of this checkout (pip's
  ``direct_url.json`` names this folder);
- this script installed it from the same ``setup.py`` and the same ``pyproject.toml`` outside
  its ``[tool.*]`` tables (a digest of the two is kept in the environment, beside
  ``pyvenv.cfg``), so a change of the dependencies, the extras or the build installs again,
  and a change of the linters' or pytest's settings does not;
- every distribution topictk requires, its ``test`` extra's included, is installed (by name:
  the versions are pip's to check when it installs);
- every kernel (each ``.pyx`` under ``topictk/``) has its compiled module for this Python
  beside it, newer than the ``.pyx`` and than every ``.pxd``, and it imports.

Otherwise it runs ``pip install -e ".[test]"`` in the repository root and, when that succeeds,
records the digest. After editing a kernel, ``python setup.py build_ext --inplace`` (which
compiles only what changed) also brings the kernels up to date.

Only the standard library is used: the script runs in a new virtual environment before
anything is installed in it.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "topictk"
EXTRA = "test"
PIP_INSTALL = ["-m", "pip", "install", "-e", f".[{EXTRA}]"]
STAMP = "topictk-test-install.sha256"      # in the environment's folder (sys.prefix)

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


@dataclass
class Install:
    """What this environment holds of topictk."""

    checkout: Path | None            # the folder of an editable install, None if not editable
    digest: str | None               # the digest recorded when this script installed it
    missing: list[str] = field(default_factory=list)   # required distributions not installed


def build_digest(root: Path) -> str:
    """sha256 of what an install is made from: ``setup.py`` and ``pyproject.toml`` without
    its ``[tool.*]`` tables (the settings of pytest, ruff and import-linter)."""
    kept, in_tool = [], False
    for line in (root / "pyproject.toml").read_text(encoding="utf-8").splitlines():
        header = re.match(r"\s*\[\[?\s*([^\]\s]+)", line)
        if header:
            in_tool = header.group(1).startswith("tool.")
        if not in_tool:
            kept.append(line)
    digest = hashlib.sha256("\n".join(kept).encode())
    digest.update((root / "setup.py").read_bytes())
    return digest.hexdigest()


def stamp_path() -> Path | None:
    """Where the digest of the last install is kept: the virtual environment's folder (None
    outside a virtual environment, where nothing is recorded and every run installs)."""
    return Path(sys.prefix) / STAMP if sys.prefix != sys.base_prefix else None


def required(dist: metadata.Distribution, extra: str) -> list[str]:
    """Names of the distributions ``dist`` requires, with those of ``extra``; a requirement
    under any other environment marker is left to pip."""
    names = []
    for requirement in dist.requires or []:
        spec, _, marker = requirement.partition(";")
        if marker.strip():
            extras = _EXTRA_MARKER.findall(marker)
            if extras != [extra] or re.search(r"\b(?:and|or)\b", marker):
                continue
        names.append(_NAME.match(spec).group(1))
    return names


def installed(name: str = DISTRIBUTION, extra: str = EXTRA) -> Install | None:
    """This environment's install of ``name`` (None when it has none). The checkout's own
    folder is not searched: the ``topictk.egg-info`` that an in-place build leaves there is
    not an install."""
    path = [entry for entry in sys.path if Path(entry or ".").resolve() != ROOT]
    dist = next(iter(metadata.distributions(name=name, path=path)), None)
    if dist is None:
        return None
    checkout = None
    direct = dist.read_text("direct_url.json")
    if direct:
        info = json.loads(direct)
        if info.get("dir_info", {}).get("editable") and info.get("url", "").startswith("file:"):
            checkout = Path(unquote(urlparse(info["url"]).path)).resolve()
    stamp = stamp_path()
    digest = stamp.read_text().strip() if stamp is not None and stamp.is_file() else None
    missing = []
    for needed in required(dist, extra):
        try:
            metadata.distribution(needed)
        except metadata.PackageNotFoundError:
            missing.append(needed)
    return Install(checkout, digest, missing)


def kernels(root: Path) -> list[Path]:
    """The kernels' sources: every ``.pyx`` under ``topictk/``."""
    return sorted((root / "topictk").rglob("*.pyx"))


def module_name(root: Path, pyx: Path) -> str:
    return ".".join(pyx.relative_to(root).with_suffix("").parts)


def stale(root: Path, install: Install | None, suffix: str) -> list[str]:
    """Why the install of the checkout ``root`` is not up to date (empty when it is);
    ``suffix`` is this Python's suffix of compiled modules (``.cpython-311-x86_64-...so``)."""
    if install is None:
        return ["topictk is not installed in this environment"]
    if install.checkout is None:
        return ["topictk is installed, but not as an editable install of a checkout"]
    if install.checkout != root.resolve():
        return [f"topictk is installed from {install.checkout}, not from {root}"]
    reasons = []
    if install.digest != build_digest(root):
        reasons.append("setup.py or pyproject.toml differ from those of the last install "
                       "by this script" if install.digest else
                       "topictk was not installed by this script (no record of its build)")
    if install.missing:
        reasons.append("not installed: " + ", ".join(install.missing))
    headers = list((root / "topictk").rglob("*.pxd"))
    for pyx in kernels(root):
        built = pyx.with_name(pyx.stem + suffix)
        if not built.exists():
            reasons.append(f"{built.relative_to(root)} is not built")
            continue
        at = built.stat().st_mtime
        newer = [p for p in (pyx, *headers) if p.stat().st_mtime > at]
        if newer:
            reasons.append(f"{built.relative_to(root)} is older than "
                           f"{', '.join(str(p.relative_to(root)) for p in newer[:3])}")
    return reasons


def import_errors(root: Path) -> list[str]:
    """The kernels that do not import (a build for another numpy, say)."""
    errors = []
    for pyx in kernels(root):
        name = module_name(root, pyx)
        try:
            importlib.import_module(name)
        except ImportError as exc:
            errors.append(f"{name} does not import: {exc}")
    return errors


def record(root: Path) -> None:
    """Keep the digest of the checkout's build inputs beside the environment's pyvenv.cfg."""
    stamp = stamp_path()
    if stamp is None:
        return
    tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}")
    tmp.write_text(build_digest(root) + "\n")
    os.replace(tmp, stamp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install topictk with its test extra "
                                     "(pip install -e '.[test]') unless it is up to date.")
    parser.add_argument("--check", action="store_true",
                        help="only say whether an install is needed (exit 1 if it is)")
    parser.add_argument("--force", action="store_true", help="install in any case")
    args = parser.parse_args(argv)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    reasons = (["--force"] if args.force else
               stale(ROOT, installed(), suffix) or import_errors(ROOT))
    name = "tests/install_if_needed.py"
    if not reasons:
        print(f"{name}: topictk is installed from this checkout and up to date; nothing to "
              f"build", file=sys.stderr)
        return 0
    print(f"{name}: {'install needed' if args.check else 'installing'}: {reasons[0]}"
          + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""), file=sys.stderr)
    if args.check:
        return 1
    returncode = subprocess.call([sys.executable, *PIP_INSTALL], cwd=ROOT)
    if returncode == 0:
        record(ROOT)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
