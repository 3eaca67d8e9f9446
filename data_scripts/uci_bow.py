"""Fetch UCI "Bag of Words" corpora (docword + vocab files) into a local cache.

Command line (prints the paths of the files, one per line, on stdout)::

    python data_scripts/uci_bow.py NAME [NAME ...] [--cache DIR] [--base-url URL] [--quiet]
    python data_scripts/uci_bow.py NAME --docword-size BYTES --vocab-size BYTES

NAME is one of kos, nips, enron, nytimes, pubmed. For each name the files
``docword.NAME.txt.gz`` and ``vocab.NAME.txt`` are downloaded from the UCI Machine Learning
Repository (``--base-url``, default
https://archive.ics.uci.edu/ml/machine-learning-databases/bag-of-words/) into the cache folder
(``--cache``, default ``~/.cache/topictk``) with the resumable downloader of ``download.py``.

Checks after the download:

* kos: the SHA-256 of the *uncompressed* ``docword.kos.txt`` must be
  0913cf084375360ce32c497dc2f8eafc4cf24a231f3d39bdbf8c41de29797cb4 (D=3,430, W=6,906,
  NNZ=353,160); on a mismatch the docword file is deleted.
* all corpora: the docword header must be three integers D, W, NNZ and the vocabulary must have
  W lines. No checksums are known for the other corpora; ``--docword-size`` / ``--vocab-size``
  (with a single NAME) add a size check of the downloaded files.

Exit status: 0 on success, 1 on a failed download or check, 2 on a usage error.
"""

from __future__ import annotations

import gzip
import hashlib
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

from _common import ArgumentParser, DataError, run_main
from download import download

PROG = "uci_bow.py"
DEFAULT_BASE_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/bag-of-words/"
CORPORA = ("kos", "nips", "enron", "nytimes", "pubmed")
# SHA-256 of the uncompressed docword file, where known.
UNCOMPRESSED_SHA256 = {
    "kos": "0913cf084375360ce32c497dc2f8eafc4cf24a231f3d39bdbf8c41de29797cb4",
}


def docword_name(name: str) -> str:
    return f"docword.{name}.txt.gz"


def vocab_name(name: str) -> str:
    return f"vocab.{name}.txt"


def gunzip_sha256(path: Path) -> str:
    """SHA-256 of the decompressed content of a gzip file, computed in a stream."""
    digest = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: not a complete gzip file ({exc})") from None
    return digest.hexdigest()


def read_docword_header(path: Path) -> tuple[int, int, int]:
    """The three header integers D, W, NNZ of a gzip-compressed UCI docword file."""
    values: list[int] = []
    try:
        with gzip.open(path, "rt", encoding="ascii", errors="replace") as fh:
            for _ in range(3):
                line = fh.readline()
                token = line.strip()
                if not token.isdigit():
                    raise DataError(
                        f"{path}: expected a UCI docword header (three lines D, W, NNZ), "
                        f"got {token[:40]!r}"
                    )
                values.append(int(token))
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: not a readable gzip file ({exc})") from None
    return values[0], values[1], values[2]


def count_lines(path: Path) -> int:
    """Number of non-empty lines (a missing final newline does not matter)."""
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                n += 1
    return n


def fetch_corpus(
    name: str,
    cache: Path | None = None,
    base_url: str = DEFAULT_BASE_URL,
    progress: bool = True,
    timeout: float = 60.0,
    docword_size: int | None = None,
    vocab_size: int | None = None,
) -> tuple[Path, Path]:
    """Download and check one corpus; return (docword path, vocab path).

    ``docword_size`` / ``vocab_size`` (bytes of the files as served) are checked when given.
    """
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r} (expected one of {', '.join(CORPORA)})")
    base = base_url if base_url.endswith("/") else base_url + "/"
    docword = download(
        base + docword_name(name), cache, size=docword_size, progress=progress, timeout=timeout
    )
    vocab = download(
        base + vocab_name(name), cache, size=vocab_size, progress=progress, timeout=timeout
    )

    known = UNCOMPRESSED_SHA256.get(name)
    if known is not None:
        actual = gunzip_sha256(docword)
        if actual != known:
            docword.unlink(missing_ok=True)
            raise DataError(
                f"{docword}: SHA-256 of the uncompressed docword is {actual}, "
                f"expected {known}; file deleted"
            )
    _, n_words, _ = read_docword_header(docword)
    n_vocab = count_lines(vocab)
    if n_vocab != n_words:
        # one of the two is not the file served for this corpus: without deleting them, every
        # later run would find them in the cache and fail the same way
        docword.unlink(missing_ok=True)
        vocab.unlink(missing_ok=True)
        raise DataError(
            f"{vocab}: has {n_vocab} words, but the header of {docword.name} says W = {n_words}; "
            f"both files were deleted from the cache, run again to download them afresh"
        )
    return docword, vocab


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Download UCI Bag of Words corpora (docword.NAME.txt.gz and vocab.NAME.txt) "
        "into a "
        "cache folder, check them, and print their paths.",
    )
    parser.add_argument(
        "names", metavar="NAME", nargs="+", choices=CORPORA, help=f"one of: {', '.join(CORPORA)}"
    )
    parser.add_argument(
        "--cache",
        metavar="DIR",
        type=Path,
        default=None,
        help="download folder (default: ~/.cache/topictk)",
    )
    parser.add_argument(
        "--base-url", metavar="URL", default=DEFAULT_BASE_URL, help=f"default: {DEFAULT_BASE_URL}"
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=float,
        default=60.0,
        help="network timeout (default 60)",
    )
    parser.add_argument(
        "--docword-size",
        metavar="BYTES",
        type=int,
        help="expected size of docword.NAME.txt.gz (one NAME only)",
    )
    parser.add_argument(
        "--vocab-size",
        metavar="BYTES",
        type=int,
        help="expected size of vocab.NAME.txt (one NAME only)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    names = list(dict.fromkeys(args.names))
    sizes = (args.docword_size, args.vocab_size)
    if any(size is not None for size in sizes) and len(names) != 1:
        parser.error("--docword-size and --vocab-size need exactly one NAME")
    if any(size is not None and size < 0 for size in sizes):
        parser.error("sizes must be >= 0")
    for name in names:
        docword, vocab = fetch_corpus(
            name,
            args.cache,
            base_url=args.base_url,
            progress=not args.quiet,
            timeout=args.timeout,
            docword_size=args.docword_size,
            vocab_size=args.vocab_size,
        )
        print(docword)
        print(vocab)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(PROG, main, None))
