"""The store of a run that adds documents (``topictk train --continue RUN --add STORE``).

The union of a run's store (the *base*) and a store of new documents (the *added* store) is a
complete corpus store: the training documents are the base's followed by the added store's, in
store order; the test split (observed and held-out parts, ids, metadata, features) is the
base's, unchanged, so that the continued run is scored on the very tokens the run was; the
vocabulary is the base's, word ids unchanged, followed by the added store's words that the base
lacks, in the added store's order. Nothing in either store is changed. The union's manifest
records its base's held-out id (:func:`heldout_id`): runs of the two stores are scored on the
same held-out tokens, and ``compare``, ``plot`` and ``report`` rank them together.

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
from topictk.corpus.vocab import vocab_hash
from topictk.errors import CorpusUsageError

#: the ``options`` of a manifest that must agree between the base and the added store (how
#: text became tokens); the vocabulary's own selection may differ
PREPROCESSING_OPTIONS = ("min_length", "stopwords")


@dataclass(frozen=True)
class UnionFacts:
    """What the union added: documents, tokens, words new to the base's vocabulary and their
    tokens (counted in the added store's training documents)."""

    base_documents: int
    base_tokens: int
    base_words: int
    added_documents: int
    added_tokens: int
    new_words: int
    new_word_tokens: int

    @classmethod
    def of_manifest(cls, manifest: dict) -> "UnionFacts":
        union = manifest["union"]
        return cls(**{key: int(union[key]) for key in cls.__dataclass_fields__})


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


def union_vocabulary(base: list[str], added: list[str]) -> tuple[list[str], np.ndarray]:
    """The union's vocabulary (the base's words, then the added store's new words in its
    order) and (V_added,) int32: the union id of every word id of the added store."""
    ids = {word: i for i, word in enumerate(base)}
    vocab = list(base)
    remap = np.empty(len(added), dtype=np.int32)
    for j, word in enumerate(added):
        if word not in ids:
            ids[word] = len(vocab)
            vocab.append(word)
        remap[j] = ids[word]
    return vocab, remap


def remap_csr(indptr: np.ndarray, indices: np.ndarray, counts: np.ndarray, remap: np.ndarray,
              n_words: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR rows with every word id mapped by ``remap``, sorted ascending again in each row."""
    rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    words = remap[np.asarray(indices)].astype(np.int64)
    order = np.argsort(rows * n_words + words, kind="stable")
    return (np.asarray(indptr, dtype=np.int64), words[order].astype(np.int32),
            np.asarray(counts, dtype=np.int32)[order])


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
    new_words = remap[np.asarray(new.words)]
    arrays["train_doc_ptr"] = _stack_ptr(old.doc_ptr, new.doc_ptr)
    arrays["train_words"] = np.concatenate([np.asarray(old.words), new_words])
    new_csr = ptr_to_csr(np.asarray(new.doc_ptr, dtype=np.int64), new_words, n_words)
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


def write_union_store(base: CorpusStore, added: CorpusStore, out: Path) -> dict:
    """Write the union of ``base`` and ``added`` to ``out`` (a new folder); returns its
    manifest, whose ``union`` section records both stores and :class:`UnionFacts`."""
    check_added(base, added)
    base.verify()
    added.verify()
    vocab, remap = union_vocabulary(base.vocab, added.vocab)
    arrays = union_arrays(base, added, remap, len(vocab))
    old, new = base.train(), added.train()
    fresh = remap >= len(base.vocab)
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
        "added_tokens": new.n_tokens, "new_words": int(fresh.sum()),
        "new_word_tokens": new_word_tokens}
    if base.has_snippets and not added.has_snippets:
        manifest.pop("snippets", None)
    return write_store(out, arrays, vocab, manifest,
                       train_ids=base.document_ids("train") + added.document_ids("train"),
                       test_ids=base.document_ids("test"),
                       train_meta=_metadata(base, added), test_meta=base.metadata("test"))
