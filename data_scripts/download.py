"""Download a file into a local cache, resumably, with optional size and SHA-256 checks.

Command line (prints the path of the cached file on stdout)::

    python data_scripts/download.py URL [--sha256 HEX] [--size BYTES] [--cache DIR] [--quiet]

As a module (``data_scripts/`` on ``sys.path``)::

    from download import download
    path = download(url, dest_dir, sha256="...", size=12345)

Behaviour:

* The file goes to ``DEST_DIR/<name>``, where ``<name>`` is the last component of the URL path.
  ``DEST_DIR`` defaults to ``$XDG_CACHE_HOME/topictk`` (usually ``~/.cache/topictk``).
  A file already in the cache is reused if it passes the size and SHA-256 checks that were asked
  for; otherwise it is downloaded again.
* Data is written to ``<name>.part`` first. If that file exists, the download continues from its
  end with an HTTP ``Range`` request; a server that ignores ``Range`` (answers 200 instead of 206)
  makes the download start again from zero.
* If the connection drops, or the server sends fewer bytes than its ``Content-Length``, a
  ``DownloadError`` is raised and ``<name>.part`` is kept, so that the next call resumes.
* When ``size`` / ``sha256`` are given they are checked once the file is complete. On a mismatch
  the downloaded file is deleted and ``DownloadError`` is raised.
* Only a complete, verified file is renamed (``os.replace``) to its final name.
* Progress goes to stderr: a tqdm bar when tqdm is installed, else a plain text line.

Exit status of the command: 0 on success, 1 on a failed download or check, 2 on a usage error.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import posixpath
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import ArgumentParser, DataError, UsageError, run_main

PROG = "download.py"
CHUNK_SIZE = 1 << 16
USER_AGENT = "topictk-data-scripts/1.0 (Python urllib)"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_RANGE_RE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$", re.IGNORECASE)


URL_SCHEMES = ("https", "http", "ftp", "file")


class DownloadError(DataError):
    """A download failed, was incomplete, or did not pass its size/SHA-256 check."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/topictk``, or ``~/.cache/topictk`` when that variable is unset."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "topictk"


def filename_from_url(url: str) -> str:
    """The last component of the URL path (percent-decoded), e.g. ``docword.kos.txt.gz``."""
    name = posixpath.basename(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        raise DownloadError(f"{url}: cannot derive a file name from the URL")
    return name


def normalize_sha256(value: str) -> str:
    """Lower-case a hex SHA-256 digest; ``ValueError`` unless it is 64 hex digits."""
    digest = value.strip().lower()
    if not _SHA256_RE.match(digest):
        raise ValueError(f"not a SHA-256 hex digest (expected 64 hex digits): {value!r}")
    return digest


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(
    url: str,
    dest_dir: Path | str | None = None,
    sha256: str | None = None,
    size: int | None = None,
    progress: bool = True,
    *,
    filename: str | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` into ``dest_dir`` (default: the cache folder) and return the file's path.

    ``sha256`` (hex) and ``size`` (bytes) are checked when given; on a mismatch the file is
    deleted and ``DownloadError`` is raised. An interrupted download leaves ``<name>.part``
    behind and the next call resumes it. ``filename`` overrides the name taken from the URL.
    """
    expected_sha = normalize_sha256(sha256) if sha256 is not None else None
    if size is not None and size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in URL_SCHEMES:
        raise UsageError(f"{url}: not a URL this script can fetch; give it with its scheme "
                         f"({', '.join(s + '://' for s in URL_SCHEMES)})")
    dest = Path(dest_dir) if dest_dir is not None else default_cache_dir()
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DownloadError(
            f"{dest}: cannot create the download folder ({exc.strerror or exc})"
        ) from None
    name = filename if filename is not None else filename_from_url(url)
    final = dest / name
    part = dest / f"{name}.part"

    if final.is_file():
        problem = _check(final, expected_sha, size)
        if problem is None:
            return final
        if progress:
            print(
                f"{name}: cached copy failed its check ({problem}); downloading again",
                file=sys.stderr,
            )
        final.unlink()

    _fetch(url, part, size, progress, timeout)

    problem = _check(part, expected_sha, size)
    if problem is not None:
        part.unlink(missing_ok=True)
        raise DownloadError(f"{url}: {problem}; the downloaded file was deleted")
    os.replace(part, final)
    return final


def _check(path: Path, expected_sha: str | None, size: int | None) -> str | None:
    """Return a description of the first failed check, or None if the file passes."""
    if size is not None:
        actual_size = path.stat().st_size
        if actual_size != size:
            return f"size is {actual_size} bytes, expected {size}"
    if expected_sha is not None:
        actual_sha = sha256_of_file(path)
        if actual_sha != expected_sha:
            return f"SHA-256 mismatch (got {actual_sha}, expected {expected_sha})"
    return None


def _parse_content_range(value: str | None) -> tuple[int | None, int | None]:
    """``bytes START-END/TOTAL`` -> (START, TOTAL); unknown parts are None."""
    if not value:
        return None, None
    match = _CONTENT_RANGE_RE.match(value)
    if not match:
        return None, None
    start = int(match.group(1)) if match.group(1) is not None else None
    total = int(match.group(3)) if match.group(3) != "*" else None
    return start, total


def _open(url: str, offset: int, timeout: float) -> Any:
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset > 0:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError:
        raise
    except urllib.error.URLError as exc:
        raise DownloadError(f"{url}: cannot connect ({exc.reason})") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise DownloadError(f"{url}: request failed ({exc})") from None


def _fetch(url: str, part: Path, size: int | None, progress: bool, timeout: float) -> None:
    """Bring ``part`` up to the complete remote file, resuming when possible."""
    offset = part.stat().st_size if part.is_file() else 0
    if size is not None and offset > size:
        part.unlink()
        offset = 0
    if size is not None and offset == size and offset > 0:
        return  # the partial file is already complete; the caller verifies it

    try:
        response = _open(url, offset, timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset > 0:
            # Range not satisfiable: either .part is already complete or it is stale.
            _, total = _parse_content_range(exc.headers.get("Content-Range"))
            exc.close()
            if total == offset:
                return
            part.unlink()
            offset = 0
            try:
                response = _open(url, 0, timeout)
            except urllib.error.HTTPError as exc2:
                exc2.close()
                raise DownloadError(f"{url}: HTTP error {exc2.code} {exc2.reason}") from None
        else:
            exc.close()
            raise DownloadError(f"{url}: HTTP error {exc.code} {exc.reason}") from None

    with response:
        status = response.getcode() or 200
        length_header = response.headers.get("Content-Length")
        length = int(length_header) if length_header and length_header.strip().isdigit() else None
        if offset > 0 and status == 206:
            start, total = _parse_content_range(response.headers.get("Content-Range"))
            if start != offset:
                raise DownloadError(
                    f"{url}: server answered the resume request with range starting at {start}, "
                    f"expected {offset}; delete {part} to start over"
                )
            if total is None and length is not None:
                total = offset + length
            mode = "ab"
        else:
            # No resume requested, or the server ignored Range and sent the whole file.
            offset = 0
            total = length
            mode = "wb"
        if size is not None and total is not None and total != size:
            part.unlink(missing_ok=True)
            raise DownloadError(f"{url}: server reports {total} bytes, expected {size}")

        received = offset
        bar = _Progress(part.name[: -len(".part")], total, offset, progress)
        try:
            with open(part, mode) as out:
                while True:
                    try:
                        chunk = response.read(CHUNK_SIZE)
                    except (OSError, http.client.HTTPException) as exc:
                        raise DownloadError(
                            f"{url}: connection lost after {received} of {_fmt_total(total)} bytes "
                            f"({exc or type(exc).__name__}); partial file kept at {part}, "
                            "run again to resume"
                        ) from None
                    if not chunk:
                        break
                    try:
                        out.write(chunk)
                        out.flush()
                    except OSError as exc:
                        raise DownloadError(
                            f"{part}: cannot write ({exc.strerror or exc})"
                        ) from None
                    received += len(chunk)
                    bar.update(received)
        finally:
            bar.close()
    if total is not None and received < total:
        raise DownloadError(
            f"{url}: incomplete download, connection closed after {received} of {total} bytes; "
            f"partial file kept at {part}, run again to resume"
        )


def _fmt_total(total: int | None) -> str:
    return "unknown" if total is None else str(total)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


class _Progress:
    """Progress display on stderr: tqdm when importable, else a text line redrawn in place."""

    def __init__(self, label: str, total: int | None, initial: int, enabled: bool) -> None:
        self.label = label
        self.total = total
        self.enabled = enabled
        self.done = initial
        self._bar: Any = None
        self._last = 0.0
        if not enabled:
            return
        try:
            from tqdm import tqdm  # type: ignore[import-untyped]
        except ImportError:
            self._draw(force=True)
        else:
            self._bar = tqdm(
                total=total,
                initial=initial,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=label,
                file=sys.stderr,
            )

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(done - self.done)
        self.done = done
        if self._bar is None:
            self._draw()

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        if self.total:
            pct = 100.0 * self.done / self.total
            text = f"{self.label}: {_human(self.done)} / {_human(self.total)} ({pct:.0f}%)"
        else:
            text = f"{self.label}: {_human(self.done)}"
        sys.stderr.write(f"\r{text}   ")
        sys.stderr.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            self._draw(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()
        self.enabled = False


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Download URL into a cache folder (resumable; optional size and SHA-256 "
        "checks) "
        "and print the path of the downloaded file.",
    )
    parser.add_argument("url", metavar="URL", help="http(s) URL of the file")
    parser.add_argument(
        "--sha256", metavar="HEX", help="expected SHA-256 of the file (64 hex digits)"
    )
    parser.add_argument(
        "--size", metavar="BYTES", type=int, help="expected size of the file in bytes"
    )
    parser.add_argument(
        "--cache",
        metavar="DIR",
        type=Path,
        default=None,
        help="download folder (default: ~/.cache/topictk)",
    )
    parser.add_argument(
        "--filename", metavar="NAME", help="file name in the cache (default: taken from the URL)"
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=60.0,
        help="network timeout (default 60)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.sha256 is not None:
        try:
            normalize_sha256(args.sha256)
        except ValueError as exc:
            parser.error(f"--sha256: {exc}")
    if args.size is not None and args.size < 0:
        parser.error("--size must be >= 0")
    if args.filename is not None and (args.filename in ("", ".", "..") or "/" in args.filename):
        parser.error("--filename must be a plain file name")
    path = download(
        args.url,
        args.cache,
        sha256=args.sha256,
        size=args.size,
        progress=not args.quiet,
        filename=args.filename,
        timeout=args.timeout,
    )
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(PROG, main, None))
