"""The corpus store: a directory of memory-mappable ``.npy`` arrays, ``vocab.txt`` and
``manifest.json`` (counts, split, hashes, format version).

Layout (D documents, V words; docs/algorithms.md §1.5 for the two representations)::

    train_doc_ptr.npy   int64 (D+1)   token offsets (representation T)
    train_words.npy     int32 (N)     word ids in canonical (load) order
    train_indptr.npy    int64 (D+1)   the same documents as CSR (representation C)
    train_indices.npy   int32 (M)     word ids, ascending inside a row
    train_counts.npy    int32 (M)
    test_obs_*          the observed part of each test document, both representations
    test_held_*         the held-out part of each test document, CSR only
    train_held_*        optional (Protocol B, ``prepare --heldout-train-fraction``): the
                        held-out tokens of each training document, CSR only; the train_*
                        arrays then hold the observed parts. Listed in manifest.json only
                        when present, so stores without them still open.
    train_ids.txt, test_ids.txt      original document ids, one per line
    train_meta.jsonl, test_meta.jsonl  metadata fields (JSONL input or --meta-file)
    train_features, test_features     optional (prepare --meta): (D, F) float64 features
    train_slices, test_slices         optional (prepare --time-column): int32 (D) the time
                        slice of each document, named in the manifest's ``time``
    train_snippet_ptr   int64 (D+1)   optional (prepare --snippets N): byte offsets into
    train_snippet_text  uint8         the first N characters of each training document's
                        text (white space collapsed), one UTF-8 blob
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topictk._fileio import new_dir_mode, replacement_mode
from topictk.errors import CorpusError, CorpusUsageError
from topictk.limits import json_loads, short, text_lines
from topictk.markers import (PARTIAL_MARKER, has_run_marker, has_store_manifest, is_partial_of,
                             write_partial_marker)

FORMAT = "topictk-corpus"
FORMAT_VERSION = 1

ARRAYS = {
    "train_doc_ptr": np.int64, "train_words": np.int32,
    "train_indptr": np.int64, "train_indices": np.int32, "train_counts": np.int32,
    "test_obs_doc_ptr": np.int64, "test_obs_words": np.int32,
    "test_obs_indptr": np.int64, "test_obs_indices": np.int32, "test_obs_counts": np.int32,
    "test_held_indptr": np.int64, "test_held_indices": np.int32, "test_held_counts": np.int32,
}

# Written only when given (Protocol B token hold-out on the training documents, §11.1).
OPTIONAL_ARRAYS = {
    "train_held_indptr": np.int64, "train_held_indices": np.int32, "train_held_counts": np.int32,
    # document features from metadata (prepare --meta; DMR), the intercept last
    "train_features": np.float64, "test_features": np.float64,
    # each document's time slice (prepare --time-column), numbered in time order
    "train_slices": np.int32, "test_slices": np.int32,
    # the start of each training document's text (prepare --snippets), for people to read
    "train_snippet_ptr": np.int64, "train_snippet_text": np.uint8,
}


def tokens_to_ptr(docs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Token lists -> (doc_ptr int64, words int32), representation T."""
    ptr = np.zeros(len(docs) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([d.size for d in docs]) if docs else []
    words = np.concatenate(docs).astype(np.int32) if docs else np.zeros(0, np.int32)
    return ptr, words


def ptr_to_csr(ptr: np.ndarray, words: np.ndarray,
               n_words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Representation T -> C: (indptr, indices ascending per row, counts)."""
    n_docs = ptr.size - 1
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(ptr))
    key = doc_of * n_words + words.astype(np.int64)
    uniq, counts = np.unique(key, return_counts=True)
    rows = uniq // n_words
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.add.at(indptr, rows + 1, 1)
    np.cumsum(indptr, out=indptr)
    return indptr, (uniq % n_words).astype(np.int32), counts.astype(np.int32)


def csr_to_tokens(indptr: np.ndarray, indices: np.ndarray,
                  counts: np.ndarray) -> list[np.ndarray]:
    """Representation C -> per-document token arrays, each (w, c) expanded in ascending w."""
    expanded = np.repeat(indices, counts).astype(np.int32)
    ptr = np.zeros(indptr.size, dtype=np.int64)
    token_end = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    ptr[:] = token_end[indptr]
    return [expanded[ptr[d]:ptr[d + 1]] for d in range(indptr.size - 1)]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# the files a store holds besides its arrays
_STORE_TEXT_FILES = frozenset({"manifest.json", "vocab.txt", "train_ids.txt", "test_ids.txt",
                               "train_meta.jsonl", "test_meta.jsonl"})


def is_store_folder(path: Path) -> bool:
    """Whether ``path`` is a corpus store: its manifest says so (format ``topictk-corpus``);
    or, its manifest damaged, every file in it is one a store holds and every file a store
    needs is there. Any other folder with a ``manifest.json`` is someone else's."""
    path = Path(path)
    if has_store_manifest(path):
        return True
    try:
        entries = list(os.scandir(path))
    except OSError:
        return False
    names = {e.name for e in entries}
    needed = {f"{name}.npy" for name in ARRAYS} | {"manifest.json", "vocab.txt"}
    allowed = needed | _STORE_TEXT_FILES | {f"{name}.npy" for name in OPTIONAL_ARRAYS}
    return (needed <= names and names <= allowed
            and all(e.is_file(follow_symlinks=False) for e in entries))


def check_output(out: Path, force: bool, inputs: list[str] = ()) -> None:
    """Whether a store may be written at ``out``: refuse an existing path without ``force``;
    with it, refuse to replace what is not a corpus store (:func:`is_store_folder`) or an
    empty folder, the working directory or a folder above it, or a folder holding one of the
    ``inputs``."""
    out = Path(out)
    target = out.resolve()
    for source in inputs:
        folder = Path(source).resolve() if source != "-" else None
        if folder is not None and folder.is_dir() and (folder == target
                                                        or folder in target.parents):
            raise CorpusUsageError(f"{out}: is inside the input folder {source}, whose files "
                                   f"the next prepare would read as documents; choose another "
                                   f"--out")
    if not out.exists():
        return
    if not force:
        raise CorpusUsageError(f"{out}: output directory exists; choose another --out or add "
                               f"--force to replace it")
    if not out.is_dir() or not (is_store_folder(out) or not any(out.iterdir())):
        raise CorpusUsageError(f"{out}: exists and is not a topictk corpus store; --force "
                               f"replaces corpus stores only: choose another --out, or remove "
                               f"it yourself")
    if target == target.parent or target == Path.home().resolve():
        raise CorpusUsageError(f"{out}: is the root or home folder; --force never replaces it: "
                               f"choose another --out")
    cwd = Path.cwd().resolve()
    if target == cwd or target in cwd.parents:
        raise CorpusUsageError(f"{out}: is the working directory or contains it; run prepare "
                               f"from another directory or choose another --out")
    for source in inputs:
        if source != "-" and target in Path(source).resolve().parents:
            raise CorpusUsageError(f"{out}: holds the input {source}, which --force would "
                                   f"delete; choose another --out")


def write_store(out: Path, arrays: dict[str, np.ndarray], vocab: list[str], manifest: dict,
                *, train_ids: list[str], test_ids: list[str],
                train_meta: list[dict] | None, test_meta: list[dict] | None,
                force: bool = False) -> dict:
    """Write a complete store to a temporary directory beside ``out``, then rename it.

    An existing ``out`` is refused unless ``force``; with ``force`` it is replaced only once
    the new store is complete, so a failure leaves the old one untouched. The directory gets
    the mode of the one it replaces, or 0o777 & ~umask when it is new (``mkdtemp`` alone
    leaves 0700); the files in it follow the umask.
    """
    out = Path(out)
    check_output(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_stores(out)
    mode = replacement_mode(out, new_dir_mode()) if out.is_dir() else new_dir_mode()
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        exc.filename = str(out)         # not the random temporary name
        raise
    held = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fcntl.flock(held, fcntl.LOCK_EX)    # marks it as being written (remove_stale_stores)
    try:
        # what a later prepare of the same store may remove if this one is killed
        write_partial_marker(tmp, _WRITING, out.name)
        hashes = {}
        names = dict(ARRAYS)
        names.update({k: v for k, v in OPTIONAL_ARRAYS.items() if k in arrays})
        for name, dtype in names.items():
            arr = np.ascontiguousarray(arrays[name], dtype=dtype)
            path = tmp / f"{name}.npy"
            np.save(path, arr)
            hashes[name] = {"dtype": np.dtype(dtype).name, "shape": list(arr.shape),
                            "sha256": _sha256_file(path)}
        (tmp / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        (tmp / "train_ids.txt").write_text("".join(f"{i}\n" for i in train_ids), encoding="utf-8")
        (tmp / "test_ids.txt").write_text("".join(f"{i}\n" for i in test_ids), encoding="utf-8")
        for name, meta in (("train_meta.jsonl", train_meta), ("test_meta.jsonl", test_meta)):
            if meta is not None:
                (tmp / name).write_text("".join(json.dumps(m, sort_keys=True) + "\n"
                                                for m in meta), encoding="utf-8")
        manifest = dict(manifest)
        manifest["format"] = FORMAT
        manifest["format_version"] = FORMAT_VERSION
        manifest["arrays"] = hashes
        corpus_id = hashlib.sha256(json.dumps(
            [manifest["vocab_sha256"], hashes], sort_keys=True).encode()).hexdigest()
        manifest["corpus_id"] = corpus_id
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")
        # unmarked from here: killed before its rename, the folder stays for the user to see
        (tmp / PARTIAL_MARKER).unlink()
        for path in tmp.iterdir():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
        os.chmod(tmp, mode)    # once filled: the mode replaced may lack write permission
        _fsync_dir(tmp)
        if out.exists():
            _replace_store(out, tmp)
        else:
            os.replace(tmp, out)
        _fsync_dir(out.parent)
        return manifest
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and (exc.filename is None
                                         or str(exc.filename).startswith(str(tmp))):
            exc.filename = str(out)     # a failed write (disk full) names the store
        raise
    finally:
        os.close(held)


# the operations that leave marked folders beside a store: ".NAME.tmp-*" while it is written,
# ".NAME.old-*" holding the store it replaces while that is deleted
_WRITING, _REPLACING = "prepare", "replace-store"
_KINDS = {"tmp-": _WRITING, "old-": _REPLACING}


def _replace_store(out: Path, new: Path) -> None:
    """Put the complete store ``new`` in place of the store ``out``: the old one is moved
    into a marked, locked folder beside it, then deleted."""
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    held = os.open(old, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        write_partial_marker(old, _REPLACING, out.name)
        os.replace(out, old / "store")
        os.replace(new, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        os.close(held)


def remove_stale_stores(out: Path, min_age: float = 1.0) -> list[Path]:
    """Remove what killed writes of the store ``out`` left beside it: ``.NAME.tmp-*`` and
    ``.NAME.old-*`` folders that carry topictk's marker of that operation on that store
    (:mod:`topictk.markers`), no live writer holds locked, and are older than ``min_age``
    seconds. A folder of that name without the marker is someone else's and stays. Returns
    the folders removed."""
    out = Path(out)
    removed = []
    now = time.time()
    for folder in sorted(out.parent.glob(f".{glob.escape(out.name)}.*")):
        kind = folder.name[len(out.name) + 2:][:4]
        if kind not in _KINDS or folder.is_symlink():
            continue
        try:
            if not folder.is_dir() or now - folder.stat().st_mtime < min_age:
                continue
            if not is_partial_of(folder, _KINDS[kind], out.name):
                continue
            if kind == "old-" and not is_store_folder(out):
                continue        # killed before the new store took its place: kept to recover
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue        # being written
        finally:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def verify_store(path: str | Path) -> dict:
    """``prepare --verify``: open the store (its layout checks) and check every array's
    sha256; returns what was checked."""
    began = time.perf_counter()
    store = CorpusStore.open(path)
    size, damaged = 0, []
    for name in store.manifest["arrays"]:
        try:
            size += store._check_hash(name)
        except CorpusError:
            damaged.append(f"{name}.npy")
    if damaged:
        raise CorpusError(f"{path}: {len(damaged)} array(s) differ from their sha256 in "
                          f"manifest.json: {', '.join(damaged)}; the store is damaged, prepare "
                          f"the corpus again with --force")
    return {"store": str(path), "arrays": len(store.manifest.get("arrays", {})),
            "bytes": size, "vocabulary": len(store.vocab),
            "seconds": time.perf_counter() - began}


# what "set corpus to ..." advises when no store can be prepared at the path given
_NEW_STORE = ("create one with 'topictk prepare INPUT --out NEW_FOLDER' (a folder that does "
              "not exist yet) and set corpus to NEW_FOLDER")
_MAX_CONFIG_BYTES = 1 << 20     # a run's config.yaml is a few kilobytes


def _run_store(run_dir: Path) -> Path | None:
    """The corpus store named by the saved ``config.yaml`` of the run ``run_dir``, or None
    when it names none that can be read."""
    import yaml

    saved = run_dir / "config.yaml"
    try:
        if saved.stat().st_size > _MAX_CONFIG_BYTES:
            return None
        corpus = yaml.safe_load(saved.read_text(encoding="utf-8")).get("corpus")
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError, RecursionError):
        return None
    if isinstance(corpus, dict):
        corpus = corpus.get("path")
    return run_dir / corpus if isinstance(corpus, str) and corpus else None


def _no_store_error(path: Path) -> CorpusUsageError:
    """Why ``path`` (a corpus path holding no store) cannot be read, with a fix that works:
    the prepare command only where prepare would write a store there; else what to point
    corpus at instead (the store a file belongs to, a run's own store, any store)."""
    if path.is_file() and has_store_manifest(path.parent):
        return CorpusUsageError(f"{path}: is a file of the corpus store {path.parent}; set "
                                f"corpus to the folder {path.parent}")
    run = path if path.is_dir() else path.parent
    if path.exists() and has_run_marker(run):
        what = "is a run directory" if run == path else f"is a file of the run directory {run}"
        store = _run_store(run)
        if store is not None and has_store_manifest(store):
            return CorpusUsageError(f"{path}: {what}, not a corpus store; the run was trained "
                                    f"on the store {store}: set corpus to {store}")
        return CorpusUsageError(f"{path}: {what}, not a corpus store; set corpus to a corpus "
                                f"store, or {_NEW_STORE}")
    if path.is_file():
        return CorpusUsageError(f"{path}: is a file, not a corpus store; prepare it with "
                                f"'topictk prepare {path} --out STORE' and point corpus at STORE")
    if path.is_dir():
        return CorpusUsageError(f"{path}: is a folder but not a corpus store (no "
                                f"manifest.json); set corpus to a corpus store, or {_NEW_STORE}")
    for folder in path.resolve().parents:
        kind = ("run directory" if has_run_marker(folder)
                else "corpus store" if has_store_manifest(folder) else None)
        if kind is not None:
            return CorpusUsageError(f"{path}: no corpus store here, and none can be prepared "
                                    f"inside the {kind} {folder}; set corpus to a corpus "
                                    f"store, or {_NEW_STORE}")
    return CorpusUsageError(f"{path}: no corpus store here; create it with "
                            f"'topictk prepare INPUT --out {path}'")


@dataclass
class Documents:
    """A set of documents in both representations (views into the store's arrays)."""

    doc_ptr: np.ndarray | None   # (D+1,) int64, representation T (None when not stored)
    words: np.ndarray | None     # (N,) int32
    indptr: np.ndarray           # (D+1,) int64, representation C
    indices: np.ndarray          # (M,) int32
    counts: np.ndarray           # (M,) int32

    @property
    def n_docs(self) -> int:
        return self.indptr.size - 1

    @property
    def n_tokens(self) -> int:
        return int(self.counts.sum(dtype=np.int64))


# an array of the manifest is the file NAME.npy in the store itself: a name with a folder
# part, "..", or a leading dot would read (and verify) a file outside it or hidden in it
_ARRAY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class CorpusStore:
    """A prepared corpus, opened read-only; arrays are memory-mapped on first use."""

    def __init__(self, path: Path, manifest: dict):
        self.path = Path(path)
        self.manifest = manifest
        self._vocab: list[str] | None = None
        self._hashed: set[str] = set()     # arrays already checked against their sha256

    @classmethod
    def open(cls, path: str | Path) -> "CorpusStore":
        path = Path(path)
        mpath = path / "manifest.json"
        if not path.is_dir() or not mpath.exists():
            raise _no_store_error(path)
        try:
            manifest = json_loads(mpath.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorpusError(f"{mpath}: unreadable manifest ({exc}); prepare the corpus again "
                              f"with --force") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise CorpusError(f"{mpath}: not a topictk corpus manifest")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise CorpusError(f"{mpath}: corpus format version {manifest.get('format_version')} "
                              f"is not {FORMAT_VERSION}; prepare the corpus again with this "
                              f"version of topictk")
        arrays = manifest.get("arrays")
        counts = manifest.get("counts")
        if (not isinstance(arrays, dict) or not isinstance(counts, dict)
                or not all(isinstance(info, dict) for info in arrays.values())):
            raise CorpusError(f"{mpath}: damaged manifest (arrays or counts missing or not "
                              f"mappings); prepare the corpus again with --force")
        for name in arrays:
            if not _ARRAY_NAME.fullmatch(name) or ".." in name:
                raise CorpusError(f"{mpath}: array name {short(name)} is not a plain file name "
                                  f"inside the store (letters, digits, '_', '-' and '.', no "
                                  f"folder, no leading dot); the manifest was modified: "
                                  f"prepare the corpus again with --force")
            if not (path / f"{name}.npy").exists():
                raise CorpusError(f"{path / (name + '.npy')}: missing from the corpus store; "
                                  f"prepare the corpus again with --force")
        store = cls(path, manifest)
        store.check_layout()
        return store

    # ----------------------------------------------------------------- arrays
    def array(self, name: str) -> np.ndarray:
        path = self.path / f"{name}.npy"
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception as exc:    # noqa: BLE001
            # a damaged .npy header reaches NumPy's parser (ValueError, SyntaxError, ...)
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise CorpusError(f"{path}: cannot be read ({reason}); prepare the corpus again "
                              f"with --force") from None
        info = self.manifest["arrays"].get(name)
        if (info is None or list(arr.shape) != info.get("shape")
                or arr.dtype.name != info.get("dtype")):
            raise CorpusError(f"{path}: shape or dtype differs from manifest.json; the store "
                              f"was modified, prepare the corpus again with --force")
        return arr

    # ----------------------------------------------------------------- checks
    def check_layout(self) -> None:
        """The checks made whenever a store is opened, cheap enough for every command: each
        array's ``.npy`` header (dtype, shape) and file size against manifest.json, the counts
        of the manifest against the arrays' shapes, and ``vocab.txt`` against its sha256 (a few
        hundred kilobytes at most; a shuffled or cut vocabulary would name wrong words and map
        new documents to wrong ids). The arrays' contents are checked by :meth:`verify`."""
        arrays = self.manifest.get("arrays", {})
        shapes = {}
        for name, info in arrays.items():
            shapes[name] = self._check_header(name, info)
        fix = "the store was modified; prepare the corpus again with --force"

        def rows(name: str) -> int | None:
            return shapes[name][0] - 1 if shapes.get(name) else None

        def length(name: str) -> int | None:
            return shapes[name][0] if shapes.get(name) else None

        counts = self.manifest.get("counts", {})
        expected = [("train_documents", rows, ("train_doc_ptr", "train_indptr",
                                               "train_held_indptr", "train_snippet_ptr")),
                    ("test_documents", rows, ("test_obs_doc_ptr", "test_obs_indptr",
                                              "test_held_indptr")),
                    ("train_tokens", length, ("train_words",)),
                    ("test_observed_tokens", length, ("test_obs_words",)),
                    ("train_documents", length, ("train_features", "train_slices")),
                    ("test_documents", length, ("test_features", "test_slices"))]
        for key, size, names in expected:
            for name in names:
                got = size(name)
                if key in counts and got is not None and got != counts[key]:
                    raise CorpusError(f"{self.path / (name + '.npy')}: has {got} rows, "
                                      f"manifest.json counts {key} = {counts[key]}; {fix}")
        for part in ("train", "test_obs", "test_held", "train_held"):
            if f"{part}_indices" in shapes and shapes[f"{part}_indices"] != shapes.get(
                    f"{part}_counts"):
                raise CorpusError(f"{self.path / (part + '_counts.npy')}: its length differs "
                                  f"from {part}_indices.npy; {fix}")
        self._check_vocab(counts.get("vocabulary"))

    def _check_header(self, name: str, info: dict) -> tuple[int, ...]:
        """Read the ``.npy`` header of array ``name`` only, and compare it and the file size
        with the manifest entry ``info``; returns the shape."""
        path = self.path / f"{name}.npy"
        fix = "prepare the corpus again with --force"
        try:
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
                else:
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
                offset = f.tell()
                size = os.fstat(f.fileno()).st_size
        except Exception as exc:    # noqa: BLE001
            # a damaged header reaches NumPy's parser (ValueError, SyntaxError, TokenError)
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise CorpusError(f"{path}: cannot be read ({reason}); {fix}") from None
        if list(shape) != list(info.get("shape", [])) or dtype.name != info.get("dtype"):
            raise CorpusError(f"{path}: shape or dtype differs from manifest.json; the store "
                              f"was modified, {fix}")
        if fortran or dtype.hasobject:
            raise CorpusError(f"{path}: not a plain C-ordered array; {fix}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if size != offset + nbytes:
            raise CorpusError(f"{path}: {size} bytes where its header needs {offset + nbytes} "
                              f"(truncated or extended); {fix}")
        return tuple(int(n) for n in shape)

    def _check_vocab(self, n_words: int | None) -> None:
        path = self.path / "vocab.txt"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CorpusError(f"{path}: cannot be read ({exc.strerror or exc}); prepare the "
                              f"corpus again with --force") from None
        recorded = self.manifest.get("vocab_sha256")
        if recorded is not None and hashlib.sha256(data).hexdigest() != recorded:
            lines = data.count(b"\n")
            more = (f" (it has {lines} lines, the store {n_words} words)"
                    if n_words is not None and lines != n_words else "")
            raise CorpusError(f"{path}: differs from the vocabulary the store was prepared with "
                              f"(vocab_sha256 in manifest.json){more}; the word ids would name "
                              f"wrong words: restore the file, or prepare the corpus again with "
                              f"--force")
        try:
            words = text_lines(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise CorpusError(f"{path}: not UTF-8 text; prepare the corpus again with "
                              f"--force") from None
        if n_words is not None and len(words) != n_words:
            raise CorpusError(f"{path}: has {len(words)} words, manifest.json counts vocabulary "
                              f"= {n_words}; prepare the corpus again with --force")
        self._vocab = words

    def verify(self) -> int:
        """Check every array against the sha256 recorded in the manifest (the whole store
        is read); returns the bytes hashed."""
        total = 0
        for name in self.manifest["arrays"]:
            total += self._check_hash(name)
        return total

    def _check_hash(self, name: str) -> int:
        path = self.path / f"{name}.npy"
        if name in self._hashed:
            return 0
        try:
            digest = _sha256_file(path)
        except OSError as exc:
            raise CorpusError(f"{path}: cannot be read ({exc.strerror or exc}); prepare the "
                              f"corpus again with --force") from None
        if digest != self.manifest["arrays"][name]["sha256"]:
            raise CorpusError(f"{path}: content differs from manifest.json (sha256); the store "
                              f"is damaged: 'topictk prepare --verify {self.path}' lists every "
                              f"damaged file; prepare the corpus again with --force")
        self._hashed.add(name)
        return path.stat().st_size

    def train(self) -> Documents:
        return Documents(self.array("train_doc_ptr"), self.array("train_words"),
                         self.array("train_indptr"), self.array("train_indices"),
                         self.array("train_counts"))

    def test_observed(self) -> Documents:
        return Documents(self.array("test_obs_doc_ptr"), self.array("test_obs_words"),
                         self.array("test_obs_indptr"), self.array("test_obs_indices"),
                         self.array("test_obs_counts"))

    def test_heldout(self) -> Documents:
        return Documents(None, None, self.array("test_held_indptr"),
                         self.array("test_held_indices"), self.array("test_held_counts"))

    def train_heldout(self) -> Documents | None:
        """Held-out tokens of the training documents (Protocol B, row d = training document
        d), or None when the store was prepared without ``--heldout-train-fraction``."""
        if "train_held_indptr" not in self.manifest.get("arrays", {}):
            return None
        return Documents(None, None, self.array("train_held_indptr"),
                         self.array("train_held_indices"), self.array("train_held_counts"))

    def features(self, part: str) -> np.ndarray | None:
        """(D, F) document features of ``part`` ("train" or "test"), or None when the store was
        prepared without ``--meta``."""
        name = f"{part}_features"
        if name not in self.manifest.get("arrays", {}):
            return None
        # small (documents x features): checked against its sha256 the first time it is read,
        # since a damaged prior would not show anywhere else (the token arrays are checked by
        # shape, and by verify())
        self._check_hash(name)
        return self.array(name)

    def slices(self, part: str) -> np.ndarray | None:
        """(D,) int32 the time slice of every document of ``part`` ("train" or "test"),
        numbered in time order as :attr:`time_slices` names them, or None when the store was
        prepared without ``--time-column``. Checked against its sha256 when first read, and
        every slice against the manifest's count of slices."""
        name = f"{part}_slices"
        if name not in self.manifest.get("arrays", {}):
            return None
        self._check_hash(name)
        slices = self.array(name)
        n = len(self.time_slices or [])
        if slices.size and (int(slices.min()) < 0 or int(slices.max()) >= n):
            raise CorpusError(f"{self.path / (name + '.npy')}: a slice outside the {n} of "
                              f"manifest.json; prepare the corpus again with --force")
        return slices

    @property
    def time_slices(self) -> list[str] | None:
        """The names of the time slices (``prepare --time-column``), in time order; None
        without."""
        time = self.manifest.get("time")
        return list(time["labels"]) if time else None

    @property
    def has_snippets(self) -> bool:
        """Whether the store keeps the start of each training text (prepare --snippets)."""
        return "train_snippet_ptr" in self.manifest.get("arrays", {})

    def snippets(self, rows) -> list[str] | None:
        """The kept start of the text of training documents ``rows`` (store order), or None
        when the store was prepared without ``--snippets``. The two arrays are small and
        checked against their sha256 the first time they are read: a damaged text would
        show nowhere else."""
        if not self.has_snippets:
            return None
        self._check_hash("train_snippet_ptr")
        self._check_hash("train_snippet_text")
        ptr, text = self.array("train_snippet_ptr"), self.array("train_snippet_text")
        out = []
        for d in rows:
            start, end = int(ptr[d]), int(ptr[d + 1])
            if not 0 <= start <= end <= text.size:
                raise CorpusError(f"{self.path / 'train_snippet_ptr.npy'}: offsets out of "
                                  f"range; prepare the corpus again with --force")
            out.append(bytes(text[start:end]).decode("utf-8", errors="replace"))
        return out

    @property
    def feature_names(self) -> list[str]:
        return list(self.manifest.get("features", {}).get("names", []))

    # ----------------------------------------------------------------- facts
    @property
    def vocab(self) -> list[str]:
        if self._vocab is None:
            path = self.path / "vocab.txt"
            try:
                self._vocab = text_lines(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else "not valid UTF-8"
                raise CorpusError(f"{path}: cannot be read ({reason}); prepare the corpus "
                                  f"again with --force") from None
        return self._vocab

    @property
    def n_words(self) -> int:
        return int(self.manifest["counts"]["vocabulary"])

    @property
    def corpus_id(self) -> str:
        return str(self.manifest["corpus_id"])

    def document_ids(self, part: str) -> list[str]:
        """The ids of the documents of ``part`` ("train" or "test") in store order, as the
        input gave them (a JSONL ``id`` field, a file name, or ``FILE:LINE``); positions
        from 1 for a store that has no id list."""
        path = self.path / f"{part}_ids.txt"
        n_docs = self.array(f"{'train' if part == 'train' else 'test_obs'}_doc_ptr").size - 1
        if not path.exists():
            return [str(d + 1) for d in range(n_docs)]
        try:
            ids = path.read_text(encoding="utf-8").split("\n")[:-1]
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not valid UTF-8"
            raise CorpusError(f"{path}: cannot be read ({reason}); prepare the corpus again "
                              f"with --force") from None
        if len(ids) != n_docs:
            raise CorpusError(f"{path}: holds {len(ids)} ids for {n_docs} documents; prepare "
                              f"the corpus again with --force")
        return ids

    def metadata(self, part: str) -> list[dict] | None:
        path = self.path / f"{part}_meta.jsonl"
        if not path.exists():
            return None
        try:
            return [json_loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorpusError(f"{path}: cannot be read ({type(exc).__name__}); prepare the "
                              f"corpus again with --force") from None
