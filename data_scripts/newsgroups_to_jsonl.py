"""Convert the 20 Newsgroups "bydate" tarball to JSON Lines.

Command line::

    python data_scripts/newsgroups_to_jsonl.py 20news-bydate.tar.xz --out 20news.jsonl \\
        [--remove-headers] [--remove-quotes] [--remove-signatures]
    python data_scripts/newsgroups_to_jsonl.py --url URL --sha256 HEX [--cache DIR] > 20news.jsonl

The input is the bydate archive (``.tar.gz``, ``.tar.xz``, ``.tar.bz2`` or plain ``.tar``; the
compression is detected from the content), laid out as ``20news-bydate-train/<group>/<msgid>`` and
``20news-bydate-test/<group>/<msgid>``. With ``--url`` the archive is first downloaded into the
cache folder and its SHA-256 checked (e.g. the mirror used by scikit-learn,
https://ndownloader.figshare.com/files/5975967, sha256
8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610).

Output: one JSON object per message, ``{"text": ..., "group": ..., "split": "train"|"test",
"id": "<split>/<group>/<msgid>"}``, train messages first, then test; within a split sorted by
group name and then by message id (numerically). Messages are decoded as latin-1; the JSON is
ASCII (non-ASCII characters are escaped).

Cleaning options:

* ``--remove-headers``: drop everything up to and including the first blank line;
* ``--remove-quotes``: drop lines starting with ``>`` or ``|`` and attribution lines
  ("In article <...> someone writes:", "... wrote:");
* ``--remove-signatures``: drop the last line that is exactly ``--`` or ``-- `` and everything
  after it.

The archive is read once as a stream; converted messages are spooled to a temporary file so that
memory use stays small, and nothing is written until the whole archive has been read and checked.
A truncated or corrupt archive, or one with members outside the expected layout, is an error (exit
status 1) and no output file is left behind. Usage errors exit with status 2.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import sys
import tarfile
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from _common import ArgumentParser, AtomicFile, DataError, UsageError, require_input_file, run_main

PROG = "newsgroups_to_jsonl.py"
SPLITS = ("train", "test")
TOP_DIRS = {f"20news-bydate-{split}": split for split in SPLITS}
LAYOUT = "20news-bydate-train/<group>/<msgid> and 20news-bydate-test/<group>/<msgid>"
_TAIL_KEEP = 1 << 16
_ATTRIBUTION_RE = re.compile(r"^\s*In article\b|\b(?:writes|wrote)\s*:\s*$")


# --------------------------------------------------------------------------- text cleaning


def remove_headers(text: str) -> str:
    """Drop everything up to and including the first blank line.

    A message without a blank line is all header, so nothing is left.
    """
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            return "\n".join(lines[i + 1 :])
    return ""


def remove_signature(text: str) -> str:
    """Drop the block from the last signature separator line (``--`` or ``-- ``) to the end."""
    lines = text.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].rstrip("\r") in ("--", "-- "):
            return "\n".join(lines[:i])
    return text


def is_quote_line(line: str) -> bool:
    stripped = line.lstrip()
    return stripped.startswith((">", "|")) or _ATTRIBUTION_RE.search(line.rstrip("\r")) is not None


def remove_quotes(text: str) -> str:
    """Drop quoted lines (``>``/``|``) and attribution lines ("In article ... writes:" etc.)."""
    return "\n".join(line for line in text.split("\n") if not is_quote_line(line))


def clean_message(
    text: str, headers: bool = False, quotes: bool = False, signatures: bool = False
) -> str:
    if headers:
        text = remove_headers(text)
    if signatures:
        text = remove_signature(text)
    if quotes:
        text = remove_quotes(text)
    return text


# --------------------------------------------------------------------------- archive reading


class _TailReader:
    """Wrap a (decompressed) byte stream, keeping the last bytes read and the total count.

    tarfile stops silently at an all-zero *or missing* header block, so after iterating we look
    at the block where tarfile stopped to tell a proper end-of-archive marker from truncation.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.pos = 0
        self.tail = b""

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.pos += len(data)
        self.tail = (self.tail + data)[-_TAIL_KEEP:]
        return data

    def block_at(self, offset: int, size: int = tarfile.BLOCKSIZE) -> bytes | None:
        """Bytes [offset, offset+size) if they were read and are still in the tail buffer."""
        start = len(self.tail) - (self.pos - offset)
        if start < 0 or offset + size > self.pos:
            return None
        return self.tail[start : start + size]


def _open_decompressed(path: Path) -> BinaryIO:
    """Open ``path`` and return a stream of its decompressed bytes (gzip, xz, bz2 or none)."""
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb")  # type: ignore[return-value]
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


@dataclass(frozen=True)
class _Entry:
    split_index: int
    group: str
    msg_key: tuple[int, int, str]
    offset: int
    length: int


def _msg_key(name: str) -> tuple[int, int, str]:
    return (0, int(name), name) if name.isdigit() else (1, 0, name)


def _member_location(path: Path, name: str) -> tuple[str, str, str] | None:
    """(split, group, msgid) of a message member, or None for a member to ignore.

    Raises DataError for a member outside the expected layout.
    """
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if parts and parts[-1].startswith("."):  # editor / OS droppings such as .DS_Store
        return None
    if len(parts) != 3 or parts[0] not in TOP_DIRS:
        raise DataError(f"{path}: unexpected archive member {name!r} (expected {LAYOUT})")
    return TOP_DIRS[parts[0]], parts[1], parts[2]


def spool_messages(
    path: Path, spool: IO[bytes], headers: bool, quotes: bool, signatures: bool
) -> list[_Entry]:
    """Read the archive at ``path`` once, write one JSON line per message to ``spool``.

    Returns the index of the spooled lines in output order. Raises DataError on a truncated or
    corrupt archive or an unexpected layout.
    """
    entries: list[_Entry] = []
    seen: set[str] = set()
    try:
        stream = _open_decompressed(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot open ({exc.strerror or exc})") from None
    try:
        reader = _TailReader(stream)
        with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                if member.isdir():
                    continue
                location = _member_location(path, member.name)
                if location is None:
                    continue
                if not member.isfile():
                    raise DataError(f"{path}: archive member {member.name!r} is not a regular file")
                split, group, msgid = location
                doc_id = f"{split}/{group}/{msgid}"
                if doc_id in seen:
                    raise DataError(f"{path}: duplicate message {doc_id!r}")
                seen.add(doc_id)
                fh = tar.extractfile(member)
                assert fh is not None
                text = fh.read().decode("latin-1")
                text = clean_message(text, headers=headers, quotes=quotes, signatures=signatures)
                record = {"text": text, "group": group, "split": split, "id": doc_id}
                line = (json.dumps(record, ensure_ascii=True) + "\n").encode("ascii")
                offset = spool.tell()
                spool.write(line)
                entries.append(
                    _Entry(SPLITS.index(split), group, _msg_key(msgid), offset, len(line))
                )
            end_offset = tar.offset
        marker = reader.block_at(end_offset)
        if marker is None:
            raise DataError(
                f"{path}: truncated archive "
                f"(ends at byte {reader.pos} without an end-of-archive marker)"
            )
        if marker.count(0) != len(marker):
            raise DataError(f"{path}: corrupt archive (invalid tar header at byte {end_offset})")
        while reader.read(1 << 20):  # drain, so that a truncated compressed stream is noticed
            pass
    except (tarfile.TarError, EOFError, lzma.LZMAError, zlib.error, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, EOFError) or "unexpected end" in reason:
            raise DataError(f"{path}: truncated archive ({reason})") from None
        raise DataError(f"{path}: not a readable tar archive ({reason})") from None
    finally:
        stream.close()

    counts = [sum(1 for e in entries if e.split_index == i) for i in range(len(SPLITS))]
    missing = [f"20news-bydate-{s}/" for s, n in zip(SPLITS, counts, strict=True) if n == 0]
    if missing:
        raise DataError(f"{path}: no messages under {' or '.join(missing)} (expected {LAYOUT})")
    entries.sort(key=lambda e: (e.split_index, e.group, e.msg_key))
    return entries


def copy_in_order(spool: IO[bytes], entries: list[_Entry], out: IO[bytes]) -> None:
    for entry in entries:
        spool.seek(entry.offset)
        out.write(spool.read(entry.length))


# --------------------------------------------------------------------------- command line


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Convert the 20 Newsgroups bydate tarball to JSON Lines "
        '({"text", "group", "split", "id"} per message; train then test, sorted by group and '
        "message id).",
    )
    parser.add_argument(
        "tarball",
        metavar="TARBALL",
        nargs="?",
        type=Path,
        help="20news-bydate .tar.gz/.tar.xz/.tar",
    )
    parser.add_argument("--url", help="download the tarball from URL instead (requires --sha256)")
    parser.add_argument(
        "--sha256", metavar="HEX", help="expected SHA-256 of the downloaded tarball"
    )
    parser.add_argument(
        "--cache",
        metavar="DIR",
        type=Path,
        default=None,
        help="download folder for --url (default: ~/.cache/topictk)",
    )
    parser.add_argument("--out", metavar="FILE", type=Path, help="output file (default: stdout)")
    parser.add_argument(
        "--remove-headers", action="store_true", help="drop the header block of each message"
    )
    parser.add_argument(
        "--remove-quotes", action="store_true", help="drop quoted lines and attribution lines"
    )
    parser.add_argument("--remove-signatures", action="store_true", help="drop the signature block")
    parser.add_argument("--quiet", action="store_true", help="no progress or summary on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.tarball is None) == (args.url is None):
        parser.error("give either TARBALL or --url")
    if args.url is not None and args.sha256 is None:
        parser.error("--url requires --sha256")
    if args.url is None and (args.sha256 is not None or args.cache is not None):
        parser.error("--sha256 and --cache only apply to --url")

    if args.url is not None:
        from download import download, normalize_sha256

        try:
            normalize_sha256(args.sha256)
        except ValueError as exc:
            parser.error(f"--sha256: {exc}")
        path = download(args.url, args.cache, sha256=args.sha256, progress=not args.quiet)
    else:
        path = args.tarball
        require_input_file(path)

    with tempfile.TemporaryFile() as spool:
        entries = spool_messages(
            path, spool, args.remove_headers, args.remove_quotes, args.remove_signatures
        )
        if args.out is not None:
            with AtomicFile(args.out, "wb") as out:
                copy_in_order(spool, entries, out.file)
        else:
            copy_in_order(spool, entries, sys.stdout.buffer)
            sys.stdout.flush()
    if not args.quiet:
        n_train = sum(1 for e in entries if e.split_index == 0)
        print(
            f"{PROG}: {len(entries)} messages ({n_train} train, {len(entries) - n_train} test)"
            + (f" written to {args.out}" if args.out is not None else ""),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_main(PROG, main, None))
