"""Fixtures for the tests of ``data_scripts/``: import path, a local HTTP server, script runners."""

from __future__ import annotations

import importlib
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO_ROOT / "data_scripts"
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

if str(SCRIPTS_DIR) not in sys.path:
    sys.path.insert(0, str(SCRIPTS_DIR))


def load_script(name: str) -> ModuleType:
    """Import ``data_scripts/<name>.py`` as a module."""
    return importlib.import_module(name)


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_in_process(
    module: ModuleType, argv: Sequence[str], capsys: pytest.CaptureFixture[str]
) -> Result:
    """Run a script's command line in this process, as ``python data_scripts/NAME.py`` would."""
    common = importlib.import_module("_common")
    capsys.readouterr()
    try:
        code = common.run_main(module.PROG, module.main, list(argv))
    except SystemExit as exc:  # argparse: --help or a usage error
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def run_subprocess(script: str, argv: Sequence[str], timeout: float = 60) -> Result:
    """Run ``python data_scripts/<script>.py ARGV`` and capture its output."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS_DIR / f"{script}.py"), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO_ROOT,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data (next to the repository root); skip the test if absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path} does not exist")
    return path


# --------------------------------------------------------------------------- local HTTP server

_RANGE_RE = re.compile(r"^bytes=(\d+)-$")


@dataclass
class FileServer:
    """State of the local test HTTP server.

    ``files`` maps a URL path to its content. ``modes`` maps a URL path to a behaviour:

    * ``"normal"`` (default): honours ``Range: bytes=N-`` with 206 / 416 answers;
    * ``"ignore-range"``: always answers 200 with the whole file;
    * ``"truncate"``: announces the full ``Content-Length`` but sends only half and closes cleanly;
    * ``"drop-once"``: the first request gets half the file and then a connection reset;
      later requests are served normally.

    ``requests`` records ``(path, Range header or None)`` for every request.
    """

    base_url: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    modes: dict[str, str] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return self.base_url + path


def _make_handler(state: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            range_header = self.headers.get("Range")
            state.requests.append((self.path, range_header))
            content = state.files.get(self.path)
            if content is None:
                self.send_error(404, "Not Found")
                return
            mode = state.modes.get(self.path, "normal")
            if mode == "truncate":
                self._send_head(200, len(content))
                self.wfile.write(content[: len(content) // 2])
                self.close_connection = True
                return
            if mode == "drop-once":
                state.modes[self.path] = "normal"
                self._send_head(200, len(content))
                self.wfile.write(content[: len(content) // 2])
                self.wfile.flush()
                time.sleep(0.1)  # let the client read what was sent before the reset
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()  # RST instead of an orderly close
                self.close_connection = True
                return
            match = _RANGE_RE.match(range_header or "")
            if mode == "normal" and match:
                start = int(match.group(1))
                if start >= len(content):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(content)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header(
                    "Content-Range", f"bytes {start}-{len(content) - 1}/{len(content)}"
                )
                self.send_header("Content-Length", str(len(content) - start))
                self.end_headers()
                self.wfile.write(content[start:])
                return
            self._send_head(200, len(content))
            self.wfile.write(content)

        def _send_head(self, status: int, length: int) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.end_headers()

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # resets provoked on purpose are expected


@pytest.fixture
def http_server() -> Iterator[FileServer]:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) serving ``FileServer.files``."""
    state = FileServer()
    server = _QuietServer(("127.0.0.1", 0), _make_handler(state))
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
