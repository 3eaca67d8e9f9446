"""The store of a run that adds documents (``topictk train --continue RUN --add STORE``).

The union of a run's store (the *base*) and a store of new documents (the *added* store) is a
complete corpus store: the training documents are the base's followed by the added store's, in
store order; the test split (observed and held-out parts, ids, metadata, features) is the
base's, unchanged, so that the continued run is scored on the very tokens the run was; the
vocabulary is the base's, word ids unchanged, followed by the added store's words that the base
lacks, in the added store's order. Nothing in either store is changed. The union's manifest
records its base's held-out id (:func:`heldout_id`): runs of the two stores are scored on the
same held-out tokens, and ``compare``, ``plot`` and ``report`` rank them together.

A run whose topics have no prior to give a new word (particle EM, unsmoothed VB) takes a union
*without new words*: its vocabulary is the base's alone, and the added documents' tokens (and
held-out tokens) of words the base lacks are dropped; a document left empty stays, empty, so
that the added documents keep their ids, metadata and snippets. The manifest's ``union``
section counts the dropped words and tokens as it counts added ones (``new_words_dropped``).

Document features (``prepare --meta``) of the added documents are their metadata encoded as
the base encodes its own, never the added store's own encoding (whose means, deviations and
categories are those of the added documents).

The two stores must have been prepared alike: every preprocessing setting both manifests record
(``options.min_length``, ``options.stopwords`` and the ``preprocessing`` section) must be equal.
The vocabulary selection (``min_df``, ``max_df``, ``vocab_size``) may differ: the added words
are appended whatever the base kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topictk.corpus.features import FeatureEncoding
from topictk.corpus.store import CorpusStore, ptr_to_csr, write_store
from topictk.corpus.timeslices import TimeSlices
from topictk.corpus.vocab import vocab_hash
from topictk.errors import CorpusUsageError

#: the ``options`` of a manifest that must agree between the base and the added store (how
#: text became tokens); the vocabulary's own selection may differ
PREPROCESSING_OPTIONS = ("min_length", "stopwords")


@dataclass(frozen=True)
class UnionFacts:
    """What the union added: documents, tokens (those the union holds), words new to the
    base's vocabulary and their tokens (counted in the added store's training documents), and
    whether those words were dropped (their tokens with them) rather than added."""

    base_documents: int
    base_tokens: int
    base_words: int
    added_documents: int
    added_tokens: int
    new_words: int
    new_word_tokens: int
    new_words_dropped: bool = False

    @classmethod
    def of_manifest(cls, manifest: dict) -> "UnionFacts":
        union = manifest["union"]
        counts = {key: int(union[key]) for key in cls.__dataclass_fields__
                  if key != "new_words_dropped"}
        return cls(**counts, new_words_dropped=bool(union.get("new_words_dropped", False)))


def heldout_id(manifest: dict) -> str | None:
    """The id of a store's held-out tokens (its test split): a union store records its base's
    (``heldout_id`` in its manifest), so a run and the runs continued from it, scored on the
    same tokens, are compared as runs of one store; any other store's is its corpus id."""
    return manifest.get("heldout_id") or manifest.get("corpus_id")


def check_preprocessing(base: CorpusStore, added: CorpusStore) -> None:
    """Refuse, in one line naming the key, stores whose tokens were made differently: every
    setting of PREPROCESSING_OPTIONS and of the ``preprocessing`` section that both manifests
    record must be equal."""
    pairs = [(f"options.{key}", base.manifest.get("options", {}),
              added.manifest.get("options", {}), key) for key in PREPROCESSING_OPTIONS]
    base_pre = base.manifest.get("preprocessing")
    added_pre = added.manifest.get("preprocessing")
    if isinstance(base_pre, dict) and isinstance(added_pre, dict):
        pairs += [(f"preprocessing.{key}", base_pre, added_pre, key)
                  for key in sorted(set(base_pre) & set(added_pre))]
    for name, left, right, key in pairs:
        if key in left and key in right and left[key] != right[key]:
            raise CorpusUsageError(
                f"{added.path}: prepared with {name} = {right[key]!r}, the run's store "
                f"{base.path} with {left[key]!r}; prepare the new documents again with the "
                f"run's settings")


def check_added(base: CorpusStore, added: CorpusStore) -> None:
    """Refuse an added store that cannot join the base: test documents (the continued run is
    scored on the base's test split only), no training documents, or no metadata to encode
    as document features when the base has them."""
    counts = added.manifest["counts"]
    if counts.get("test_documents", 0):
        raise CorpusUsageError(f"{added.path}: holds {counts['test_documents']} test documents; "
                               f"a continued run is scored on its run's test split only: "
                               f"prepare the new documents with --test-docs 0")
    if not counts.get("train_documents", 0):
        raise CorpusUsageError(f"{added.path}: holds no training documents to add")
    check_preprocessing(base, added)
    time = base.manifest.get("time")
    if time is not None and added.metadata("train") is None:
        raise CorpusUsageError(f"{added.path}: has no metadata, and the run's store records "
                               f"each document's time slice from the field '{time['field']}'; "
                               f"prepare the new documents with that field (a .jsonl input or "
                               f"--meta-file) and --time-column {time['field']}")
    if base.features("train") is not None and added.metadata("train") is None:
        fields = [f["name"] for f in base.manifest["features"]["fields"]]
        raise CorpusUsageError(f"{added.path}: has no metadata, and the run's store encodes "
                               f"the fields {', '.join(fields)} as document features; prepare "
                               f"the new documents with those fields (a .jsonl input or "
                               f"--meta-file) and --meta")


def added_features(base: CorpusStore, added: CorpusStore) -> np.ndarray:
    """(D_added, F) features of the added documents, their metadata encoded as the base
    encodes its own (its training mean and standard deviation, its categories: an unseen
    category or a missing value is all zeros, as in the base's test documents)."""
    encoding = FeatureEncoding.from_json(base.manifest["features"])
    X, _ = encoding.encode(added.metadata("train"), added.document_ids("train"),
                           str(added.path / "train_meta.jsonl"))
    return X


def added_slices(base: CorpusStore, added: CorpusStore) -> np.ndarray:
    """(D_added,) int32 the time slice of every added document, its time placed in the
    base's slices (a time outside them is an error naming the document)."""
    slices = TimeSlices.from_json(base.manifest["time"])
    return slices.index(added.metadata("train"), added.document_ids("train"),
                        str(added.path / "train_meta.jsonl"))


def union_vocabulary(base: list[str], added: list[str],
                     new_words: bool = True) -> tuple[list[str], np.ndarray]:
    """The union's vocabulary (the base's words, then the added store's new words in its
    order; without ``new_words``, the base's alone) and (V_added,) int32: the union id of
    every word id of the added store, -1 for a word dropped."""
    ids = {word: i for i, word in enumerate(base)}
    vocab = list(base)
    remap = np.empty(len(added), dtype=np.int32)
    for j, word in enumerate(added):
        if word not in ids:
            if not new_words:
                remap[j] = -1
                continue
            ids[word] = len(vocab)
            vocab.append(word)
        remap[j] = ids[word]
    return vocab, remap


def kept_tokens(doc_ptr: np.ndarray, words: np.ndarray,
                remap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Representation T of documents with every word id mapped by ``remap`` and the tokens of
    the words it drops (-1) left out, each document keeping its place: (doc_ptr, words)."""
    mapped = remap[np.asarray(words)]
    keep = mapped >= 0
    ptr = np.asarray(doc_ptr, dtype=np.int64)
    kept_before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
    return kept_before[ptr], mapped[keep]


def remap_csr(indptr: np.ndarray, indices: np.ndarray, counts: np.ndarray, remap: np.ndarray,
              n_words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR rows with every word id mapped by ``remap``, sorted ascending again in each row;
    the entries of words it drops (-1) are left out."""
    n_rows = indptr.size - 1
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    words = remap[np.asarray(indices)].astype(np.int64)
    keep = words >= 0
    rows, words, counts = rows[keep], words[keep], np.asarray(counts, dtype=np.int32)[keep]
    order = np.argsort(rows * n_words + words, kind="stable")
    new_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=new_ptr[1:])
    return new_ptr, words[order].astype(np.int32), counts[order]


def _stack_ptr(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return np.concatenate([np.asarray(first, dtype=np.int64),
                           int(first[-1]) + np.asarray(second[1:], dtype=np.int64)])


def _empty_csr(n_docs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.zeros(n_docs + 1, dtype=np.int64), np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.int32))


def _stack_csr(first, second) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (_stack_ptr(first[0], second[0]), np.concatenate([first[1], second[1]]),
            np.concatenate([first[2], second[2]]))


def _csr(docs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.asarray(docs.indptr), np.asarray(docs.indices), np.asarray(docs.counts))


def union_arrays(base: CorpusStore, added: CorpusStore,
                 remap: np.ndarray, n_words: int) -> dict[str, np.ndarray]:
    """The union's arrays (module docstring)."""
    arrays: dict[str, np.ndarray] = {}
    old, new = base.train(), added.train()
    new_ptr, new_words = kept_tokens(new.doc_ptr, new.words, remap)
    arrays["train_doc_ptr"] = _stack_ptr(old.doc_ptr, new_ptr)
    arrays["train_words"] = np.concatenate([np.asarray(old.words), new_words])
    new_csr = ptr_to_csr(new_ptr, new_words, n_words)
    (arrays["train_indptr"], arrays["train_indices"],
     arrays["train_counts"]) = _stack_csr(_csr(old), new_csr)
    for name in base.manifest["arrays"]:
        if name.startswith("test_"):
            arrays[name] = np.asarray(base.array(name))
    old_held, new_held = base.train_heldout(), added.train_heldout()
    if old_held is not None or new_held is not None:
        first = _csr(old_held) if old_held is not None else _empty_csr(old.n_docs)
        second = (remap_csr(*_csr(new_held), remap, n_words) if new_held is not None
                  else _empty_csr(new.n_docs))
        (arrays["train_held_indptr"], arrays["train_held_indices"],
         arrays["train_held_counts"]) = _stack_csr(first, second)
    if base.features("train") is not None:
        arrays["train_features"] = np.concatenate([base.features("train"),
                                                   added_features(base, added)])
    if base.slices("train") is not None:
        arrays["train_slices"] = np.concatenate([base.slices("train"),
                                                 added_slices(base, added)])
    if base.has_snippets and added.has_snippets:
        old_ptr, new_ptr = base.array("train_snippet_ptr"), added.array("train_snippet_ptr")
        arrays["train_snippet_ptr"] = _stack_ptr(old_ptr, new_ptr)
        arrays["train_snippet_text"] = np.concatenate([base.array("train_snippet_text"),
                                                       added.array("train_snippet_text")])
    return arrays


def _metadata(base: CorpusStore, added: CorpusStore) -> list[dict] | None:
    old, new = base.metadata("train"), added.metadata("train")
    if old is None and new is None:
        return None
    return ((old or [{}] * base.train().n_docs) + (new or [{}] * added.train().n_docs))


def write_union_store(base: CorpusStore, added: CorpusStore, out: Path, *,
                      new_words: bool = True) -> dict:
    """Write the union of ``base`` and ``added`` to ``out`` (a new folder); returns its
    manifest, whose ``union`` section records both stores and :class:`UnionFacts`. Without
    ``new_words`` the words the base lacks are dropped with their tokens (module docstring)."""
    check_added(base, added)
    base.verify()
    added.verify()
    vocab, remap = union_vocabulary(base.vocab, added.vocab, new_words)
    arrays = union_arrays(base, added, remap, len(vocab))
    old, new = base.train(), added.train()
    fresh = (remap >= len(base.vocab)) | (remap < 0)
    new_word_tokens = int(np.bincount(np.asarray(new.words), minlength=fresh.size)[fresh].sum())
    manifest = {key: value for key, value in base.manifest.items()
                if key not in ("arrays", "corpus_id", "format", "format_version")}
    counts = dict(base.manifest["counts"])
    counts.update(train_documents=old.n_docs + new.n_docs,
                  train_tokens=int(arrays["train_words"].size), vocabulary=len(vocab))
    if "train_heldout_tokens" in counts or "train_held_counts" in arrays:
        counts["train_heldout_tokens"] = int(arrays.get("train_held_counts",
                                                        np.zeros(0)).sum())
    manifest["counts"] = counts
    manifest["vocab_sha256"] = vocab_hash(vocab)
    manifest["heldout_id"] = heldout_id(base.manifest)
    manifest["union"] = {
        "base": {"path": str(base.path), "corpus_id": base.corpus_id},
        "added": {"path": str(added.path), "corpus_id": added.corpus_id},
        "base_documents": old.n_docs, "base_tokens": old.n_tokens,
        "base_words": len(base.vocab), "added_documents": new.n_docs,
        "added_tokens": int(arrays["train_words"].size) - old.n_tokens,
        "new_words": int(fresh.sum()), "new_word_tokens": new_word_tokens,
        "new_words_dropped": not new_words}
    if base.has_snippets and not added.has_snippets:
        manifest.pop("snippets", None)
    if "train_slices" in arrays:
        manifest["time"] = dict(manifest["time"], train_documents=np.bincount(
            arrays["train_slices"], minlength=len(manifest["time"]["labels"])).tolist())
    return write_store(out, arrays, vocab, manifest,
                       train_ids=base.document_ids("train") + added.document_ids("train"),
                       test_ids=base.document_ids("test"),
                       train_meta=_metadata(base, added), test_meta=base.metadata("test"))
