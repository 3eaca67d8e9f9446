"""The Chromium the page tests drive: Debian's ``chromium`` on PATH. Without it the browser
tests are skipped, with a one-line reason, on a person's machine, and fail in CI (the ``CI``
environment variable set, as CI runners and ``.ci/run`` set it), where a skip would hide them."""
from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

import pytest

CHROMIUM = ("chromium", "chromium-browser")
MISSING = "no chromium on PATH: install Debian's chromium package (.ci/run does)"


def in_ci(environ: Mapping[str, str]) -> bool:
    """``CI`` set to anything but an empty string, 0, false or no (GitHub, GitLab and most
    runners set CI=true; .ci/run sets CI=1)."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_chromium(environ: Mapping[str, str] | None = None) -> str:
    """The path of the Chromium executable on ``environ``'s PATH; when there is none, skip the
    test outside CI and fail it in CI."""
    environ = os.environ if environ is None else environ
    path = environ.get("PATH", os.defpath)
    executable = next(filter(None, (shutil.which(name, path=path) for name in CHROMIUM)), None)
    if executable:
        return executable
    if in_ci(environ):
        pytest.fail(f"{MISSING}; CI is set, so the browser tests may not be skipped",
                    pytrace=False)
    pytest.skip(MISSING)
