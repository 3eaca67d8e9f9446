"""Convert the 20 Newsgroups ``20news_data.mat`` of Gan et al. (2015) to UCI docword files.

Command line::

    python data_scripts/mat_to_docword.py 20news_data.mat OUT_DIR

Input: a MATLAB file readable by ``scipy.io.loadmat`` holding sparse vocabulary x document count
matrices ``wordsTrain``, ``wordsHeldout`` and ``wordsTest`` and the cell array ``vocabulary``;
optionally ``labelsTrain``/``labelsTest`` (one label per document) and ``labelsToGroup`` (label
names).

Output files in OUT_DIR (created if needed):

* ``docword.train.txt.gz``          <- wordsTrain
* ``docword.test_observed80.txt.gz`` <- wordsHeldout (the part used to infer test topic proportions)
* ``docword.test_heldout20.txt.gz``  <- wordsTest (the part whose perplexity is reported)
* ``docword.test_full.txt.gz``       <- wordsHeldout + wordsTest
* ``vocab.txt``: one word per line, line i = word id i;
* ``labels.train.txt`` / ``labels.test.txt`` (if labelsTrain / labelsTest exist): one label per
  line;
* ``label_names.txt`` (if labelsToGroup exists): one name per line, in label order.

UCI docword format: three header lines D, W, NNZ, then ``docID wordID count`` lines (1-based ids,
sorted by document and then word, integer counts). D is the number of matrix columns, so documents
without any token still count; NNZ counts the non-zero entries. The gzip files are written with
mtime 0 and no embedded file name, so the output is byte-for-byte reproducible.

All inputs are checked before anything is written, and the outputs are first written under
temporary names and renamed into place only when all of them are complete. A ``.mat`` file without
the expected variables, or with non-integer or negative counts, is an error (exit status 1).
Usage errors exit with status 2.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import scipy.io
import scipy.sparse as sp
from _common import ArgumentParser, AtomicFile, DataError, UsageError, require_input_file, run_main

PROG = "mat_to_docword.py"
REQUIRED = ("wordsTrain", "wordsHeldout", "wordsTest", "vocabulary")
LINES_PER_BLOCK = 100_000


def load_mat(path: Path) -> dict[str, Any]:
    try:
        return scipy.io.loadmat(str(path))
    except (ValueError, TypeError, OSError, NotImplementedError, EOFError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise DataError(f"{path}: not a readable MATLAB .mat file ({reason})") from None


def count_matrix(mat: dict[str, Any], name: str, path: Path) -> sp.csc_matrix:
    """Variable ``name`` as a canonical CSC vocabulary x documents matrix of integer counts."""
    if name not in mat:
        raise DataError(
            f"{path}: missing variable {name!r} (expected a sparse vocabulary x documents matrix)"
        )
    value: Any = mat[name]
    m: sp.csc_matrix
    if sp.issparse(mat[name]):
        m = sp.csc_matrix(value, dtype=np.float64)
    elif isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype.kind in "biuf":
        m = sp.csc_matrix(value.astype(np.float64))
    else:
        raise DataError(
            f"{path}: variable {name!r} is not a numeric matrix "
            "(expected vocabulary x documents counts)"
        )
    m.sum_duplicates()
    m.sort_indices()
    m.eliminate_zeros()
    data = m.data
    if data.size and (
        not np.all(np.isfinite(data)) or np.any(data < 0) or np.any(data != np.round(data))
    ):
        raise DataError(
            f"{path}: variable {name!r} holds values that are not non-negative integer counts"
        )
    return m


def cell_strings(mat: dict[str, Any], name: str, path: Path, what: str) -> list[str]:
    """A MATLAB cell array (or char matrix) of strings as a Python list."""
    if name not in mat:
        raise DataError(f"{path}: missing variable {name!r} (expected a cell array of {what})")
    value = np.asarray(mat[name])
    if value.dtype.kind == "U":  # char matrix: one (space-padded) row per entry
        return [str(row).rstrip() for row in value.reshape(-1)]
    out: list[str] = []
    if value.dtype != object:
        raise DataError(f"{path}: variable {name!r} is not a cell array of {what}")
    for i, cell in enumerate(value.reshape(-1, order="F")):
        item = np.asarray(cell)
        if item.dtype.kind != "U" or item.size > 1:
            raise DataError(
                f"{path}: {name}{{{i + 1}}} is not a string (expected a cell array of {what})"
            )
        out.append(str(item.reshape(-1)[0]) if item.size else "")
    return out


def label_vector(mat: dict[str, Any], name: str, path: Path, n_docs: int) -> np.ndarray | None:
    if name not in mat:
        return None
    value = np.asarray(mat[name])
    if (
        value.dtype.kind not in "biuf"
        or value.size != n_docs
        or (value.ndim == 2 and min(value.shape) != 1)
    ):
        raise DataError(
            f"{path}: variable {name!r} should hold one numeric label per document ({n_docs})"
        )
    flat = value.reshape(-1).astype(np.float64)
    if not np.all(flat == np.round(flat)):
        raise DataError(f"{path}: variable {name!r} holds non-integer labels")
    return flat.astype(np.int64)


class _BinaryWriter(Protocol):
    def write(self, data: bytes, /) -> int: ...


def write_docword(m: sp.csc_matrix, out: _BinaryWriter) -> None:
    """Write a vocabulary x documents CSC matrix as UCI docword text (documents = columns)."""
    n_words, n_docs = m.shape
    out.write(f"{n_docs}\n{n_words}\n{m.nnz}\n".encode("ascii"))
    doc_ids = np.repeat(np.arange(1, n_docs + 1, dtype=np.int64), np.diff(m.indptr))
    word_ids = m.indices.astype(np.int64) + 1
    counts = m.data.astype(np.int64)
    for start in range(0, m.nnz, LINES_PER_BLOCK):
        stop = min(start + LINES_PER_BLOCK, m.nnz)
        block = "".join(
            f"{d} {w} {c}\n"
            for d, w, c in zip(
                doc_ids[start:stop].tolist(),
                word_ids[start:stop].tolist(),
                counts[start:stop].tolist(),
                strict=True,
            )
        )
        out.write(block.encode("ascii"))


def convert(mat_path: Path, out_dir: Path) -> list[Path]:
    """Convert ``mat_path``; return the list of files written to ``out_dir``."""
    mat = load_mat(mat_path)
    missing = [name for name in REQUIRED if name not in mat]
    if missing:
        raise DataError(
            f"{mat_path}: missing variable {', '.join(repr(n) for n in missing)} "
            f"(expected {', '.join(REQUIRED)})"
        )
    train = count_matrix(mat, "wordsTrain", mat_path)
    observed = count_matrix(mat, "wordsHeldout", mat_path)
    heldout = count_matrix(mat, "wordsTest", mat_path)
    vocab = cell_strings(mat, "vocabulary", mat_path, "words")

    n_words = len(vocab)
    for name, m in (("wordsTrain", train), ("wordsHeldout", observed), ("wordsTest", heldout)):
        if m.shape[0] != n_words:
            raise DataError(
                f"{mat_path}: {name} has {m.shape[0]} rows but vocabulary has {n_words} words"
            )
    if observed.shape != heldout.shape:
        raise DataError(
            f"{mat_path}: wordsHeldout {observed.shape} and wordsTest {heldout.shape} "
            "differ in shape"
        )
    for i, word in enumerate(vocab):
        if not word or word != word.strip() or any(ch.isspace() for ch in word):
            raise DataError(
                f"{mat_path}: vocabulary{{{i + 1}}} = {word!r} is empty or contains whitespace"
            )
    full = observed + heldout
    full.sort_indices()

    labels_train = label_vector(mat, "labelsTrain", mat_path, train.shape[1])
    labels_test = label_vector(mat, "labelsTest", mat_path, observed.shape[1])
    label_names = (
        cell_strings(mat, "labelsToGroup", mat_path, "label names")
        if "labelsToGroup" in mat
        else None
    )

    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir}: exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)

    pending: list[AtomicFile] = []
    try:
        for filename, m in (
            ("docword.train.txt.gz", train),
            ("docword.test_observed80.txt.gz", observed),
            ("docword.test_heldout20.txt.gz", heldout),
            ("docword.test_full.txt.gz", full),
        ):
            target = AtomicFile(out_dir / filename, "wb")
            pending.append(target)
            with gzip.GzipFile(
                filename="", mode="wb", fileobj=target.file, mtime=0, compresslevel=9
            ) as gz:
                write_docword(m, gz)
        text_outputs: list[tuple[str, list[str]]] = [("vocab.txt", vocab)]
        if labels_train is not None:
            text_outputs.append(("labels.train.txt", [str(v) for v in labels_train.tolist()]))
        if labels_test is not None:
            text_outputs.append(("labels.test.txt", [str(v) for v in labels_test.tolist()]))
        if label_names is not None:
            text_outputs.append(("label_names.txt", label_names))
        for filename, lines in text_outputs:
            target = AtomicFile(out_dir / filename, "w", encoding="utf-8")
            pending.append(target)
            target.file.write("".join(f"{line}\n" for line in lines))
    except BaseException:
        for target in pending:
            target.discard()
        raise
    return [target.commit() for target in pending]


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Convert 20news_data.mat (wordsTrain/wordsHeldout/wordsTest/vocabulary) to "
        "gzip-compressed "
        "UCI docword files, vocab.txt and label files in OUT_DIR.",
    )
    parser.add_argument("mat", metavar="MAT_FILE", type=Path, help="the .mat file")
    parser.add_argument(
        "out_dir", metavar="OUT_DIR", type=Path, help="output directory (created if needed)"
    )
    parser.add_argument(
        "--quiet", action="store_true", help="do not list the written files on stderr"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    require_input_file(args.mat)
    written = convert(args.mat, args.out_dir)
    if not args.quiet:
        for path in written:
            print(f"{PROG}: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(PROG, main, None))
