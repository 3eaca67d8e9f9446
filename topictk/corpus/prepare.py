"""``topictk prepare``: read input, tokenise, choose the vocabulary, split, write the store."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topictk.corpus import readers
from topictk.corpus.features import (
    fit_encoding,
    merge_meta_file,
    parse_meta_option,
    read_meta_file,
    rows_for_documents,
)
from topictk.corpus.splits import choose_test_documents, split_tokens, split_train_tokens
from topictk.corpus.stopwords import ENGLISH_STOPWORDS
from topictk.corpus.store import check_output, csr_to_tokens, ptr_to_csr, tokens_to_ptr, write_store
from topictk.corpus.text import tokenize
from topictk.corpus.vocab import document_frequency, select_vocabulary, vocab_hash
from topictk.errors import CorpusError, CorpusUsageError, UsageError

log = logging.getLogger("topictk")


DEFAULT_TEST_DOCS = 0.1
DEFAULT_HELDOUT_FRACTION = 0.2


@dataclass
class PrepareOptions:
    """Everything ``topictk prepare`` can be told (see its ``--help``)."""

    format: str = "auto"
    vocab: str | None = None
    min_length: int = 3
    stopwords: str | None = None         # "english", "none", a file, or None = format default
    min_df: float = 1
    max_df: float = 1.0
    vocab_size: int | None = None
    test_docs: float | None = None       # None: DEFAULT_TEST_DOCS (not with an imported split)
    heldout_fraction: float | None = None  # None: DEFAULT_HELDOUT_FRACTION
    heldout_train_fraction: float | None = None   # Protocol B: share of each training doc held out
    seed: int = 0
    test_observed: str | None = None
    test_heldout: str | None = None
    encoding_errors: str = "strict"
    force: bool = False
    split_field: str | None = None       # JSONL field whose value (train/test) fixes the split
    meta: str | None = None              # metadata fields kept as features: "year,party:cat"
    meta_file: str | None = None         # tab-separated metadata, one row per input document
    vocab_list: str | None = None        # a fixed vocabulary, one word per line

    def check(self) -> None:
        """Refuse values out of range and options that would be ignored; then fill in the
        split defaults."""
        for option, value in (("--min-df", self.min_df), ("--max-df", self.max_df),
                              ("--test-docs", self.test_docs),
                              ("--heldout-fraction", self.heldout_fraction),
                              ("--heldout-train-fraction", self.heldout_train_fraction)):
            if value is not None and not math.isfinite(value):
                raise UsageError(f"{option} must be a finite number; got {value}")
        if self.seed < 0:
            raise UsageError(f"--seed must be >= 0; got {self.seed}")
        if self.test_observed is not None or self.split_field is not None:
            fixed = [("--test-docs", self.test_docs)]
            if self.test_observed is not None:      # a split field chooses documents only
                fixed.append(("--heldout-fraction", self.heldout_fraction))
            given = [option for option, value in fixed if value is not None]
            if given:
                source = ("the imported split (--test-observed/--test-heldout)"
                          if self.test_observed is not None
                          else f"--split-field {self.split_field}")
                raise UsageError(f"{' and '.join(given)} cannot be used with {source}, which "
                                 f"already fixes the test set; drop {' and '.join(given)}")
        if self.test_docs is None:
            self.test_docs = DEFAULT_TEST_DOCS
        if self.heldout_fraction is None:
            self.heldout_fraction = DEFAULT_HELDOUT_FRACTION
        if self.min_length < 1:
            raise UsageError(f"--min-length must be >= 1; got {self.min_length}")
        if self.min_df <= 0 or (self.min_df >= 1 and self.min_df != int(self.min_df)):
            raise UsageError(f"--min-df must be a share in (0, 1) or a whole count >= 1; "
                             f"got {self.min_df}")
        if self.max_df <= 0:
            raise UsageError(f"--max-df must be a share in (0, 1] or a count >= 1; "
                             f"got {self.max_df}")
        if self.vocab_size is not None and self.vocab_size < 1:
            raise UsageError(f"--vocab-size must be >= 1; got {self.vocab_size}")
        if self.test_docs < 0 or (self.test_docs >= 1 and self.test_docs != int(self.test_docs)):
            raise UsageError(f"--test-docs must be a share in [0, 1) or a whole count; "
                             f"got {self.test_docs}")
        if not 0 < self.heldout_fraction < 1:
            raise UsageError(f"--heldout-fraction must be in (0, 1); got {self.heldout_fraction}")
        if self.heldout_train_fraction is not None and not 0 < self.heldout_train_fraction < 1:
            raise UsageError(f"--heldout-train-fraction must be in (0, 1); got "
                             f"{self.heldout_train_fraction}")
        if self.encoding_errors not in ("strict", "skip"):
            raise UsageError(f"--encoding-errors must be strict or skip; "
                             f"got {self.encoding_errors}")
        if self.vocab_list is not None and (self.vocab_size is not None or self.min_df != 1
                                            or self.max_df != 1.0
                                            or self.stopwords not in (None, "none")):
            raise UsageError("--vocab-list fixes the vocabulary; drop --min-df, --max-df, "
                             "--vocab-size and --stopwords (leave out of the list the words to "
                             "drop)")
        if (self.test_observed is None) != (self.test_heldout is None):
            raise UsageError("--test-observed and --test-heldout go together: give both "
                             "docword files")
        if self.meta_file is not None and self.meta is None and self.split_field is None:
            raise UsageError(f"--meta-file {self.meta_file}: nothing uses it; add --meta FIELD,... "
                             f"to keep fields as features (or --split-field FIELD)")


def _stopword_set(option: str | None, default_on: bool) -> frozenset[str]:
    if option is None:
        return ENGLISH_STOPWORDS if default_on else frozenset()
    if option == "english":
        return ENGLISH_STOPWORDS
    if option == "none":
        return frozenset()
    path = Path(option)
    if not path.is_file():
        raise CorpusUsageError(f"{path}: stop-word file not found; give 'english', 'none' or a "
                               f"file with one word per line")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CorpusError(f"{path}: stop-word file is not valid UTF-8; convert it to "
                          f"UTF-8") from None
    return frozenset(w.strip().lower() for w in text.split())


def read_vocab_list(path: str) -> list[str]:
    """A fixed vocabulary: one word per line, no empty lines, no duplicates."""
    file = Path(path)
    if not file.exists():
        raise CorpusUsageError(f"{file}: vocabulary list not found")
    try:
        words = [line.strip() for line in file.read_text(encoding="utf-8").splitlines()]
    except UnicodeDecodeError:
        raise CorpusError(f"{file}: vocabulary list is not valid UTF-8") from None
    if not words:
        raise CorpusUsageError(f"{file}: vocabulary list is empty")
    readers.check_distinct_words(words, file, "vocabulary list")
    return words


def _read_text_documents(inputs: list[str], fmt: str, opts: PrepareOptions,
                         stats: readers.ReadStats, fixed_vocab: list[str] | None = None):
    """Tokenised documents as id arrays over an input type table (or over ``fixed_vocab``,
    whose out-of-vocabulary tokens are dropped as they are read)."""
    type_ids: dict[str, int] = {w: i for i, w in enumerate(fixed_vocab)} if fixed_vocab else {}
    docs, ids, metas = [], [], []
    for doc in readers.read_text_documents(inputs, fmt, opts.encoding_errors, stats):
        tokens = tokenize(doc.text, opts.min_length)
        if fixed_vocab:
            known = [type_ids[t] for t in tokens if t in type_ids]
            docs.append(np.array(known, dtype=np.int32))
        else:
            docs.append(np.fromiter((type_ids.setdefault(t, len(type_ids)) for t in tokens),
                                    dtype=np.int32, count=len(tokens)))
        ids.append(doc.id)
        metas.append(doc.meta)
    names = [""] * len(type_ids)
    for name, i in type_ids.items():
        names[i] = name
    has_meta = any(metas)
    return docs, names, ids, (metas if has_meta else None)


def _split_from_field(field: str, metas: list[dict] | None, doc_ids: list[str],
                      inputs: list[str]) -> np.ndarray:
    """Test-document mask from a JSONL field whose values are 'train' or 'test'."""
    where = ", ".join(inputs)
    if metas is None:
        raise CorpusUsageError(f"{where}: --split-field needs JSONL input with a '{field}' field")
    mask = np.zeros(len(metas), dtype=bool)
    for i, meta in enumerate(metas):
        value = meta.get(field)
        if value not in ("train", "test"):
            raise CorpusError(f"{where}: document {doc_ids[i]} has {field} = {value!r}; "
                              f"--split-field needs 'train' or 'test' in every document")
        mask[i] = value == "test"
    return mask


def _check_test_documents(n_test: int, n_docs: int, test_docs: float) -> None:
    """Refuse a test set that leaves no training document; warn when a share gives none."""
    if n_test >= n_docs:
        raise CorpusUsageError(f"--test-docs {test_docs:g} leaves no training document (the "
                               f"input has {n_docs} documents); give a smaller share or count")
    if n_test == 0 and test_docs > 0:
        log.warning("--test-docs %g of %d documents rounds to no test document: there will be "
                    "nothing to score; give a count (e.g. --test-docs 1) or a larger share",
                    test_docs, n_docs)


def _drop_unobserved_words(vocab: list[str], observed: list[np.ndarray],
                           others: list[list[np.ndarray]]):
    """Protocol B: words of the vocabulary none of whose training tokens stayed observed are
    dropped, with their tokens in ``others`` (the training documents' held-out parts and the
    test parts). No model can learn such a word from the observed tokens; a point estimate of
    its topics would be ~0 and its held-out tokens would dominate the perplexity.

    Returns the new vocabulary, the remapped (observed, *others), and {} or the counts
    dropped ({"words", "train_heldout", "test"})."""
    V = len(vocab)
    seen = np.zeros(V, dtype=bool)
    for tokens in observed:
        seen[tokens] = True
    if seen.all():
        return vocab, (observed, *others), {}
    table = np.full(V, -1, dtype=np.int64)
    table[seen] = np.arange(int(seen.sum()))
    remapped, lost = [], []
    for docs in (observed, *others):
        mapped = [table[t] for t in docs]
        lost.append(sum(int((m < 0).sum()) for m in mapped))
        remapped.append([m[m >= 0].astype(np.int32) for m in mapped])
    words = [w for w, s in zip(vocab, seen) if s]
    log.warning("Protocol B: %d word(s) occur only in the held-out part of the training "
                "documents; dropped from the vocabulary with their %d held-out and %d test "
                "token(s)", V - len(words), lost[1], lost[2] + lost[3])
    return words, tuple(remapped), {"words": V - len(words), "train_heldout": lost[1],
                                    "test": lost[2] + lost[3]}


def _remap(docs: list[np.ndarray], keep: np.ndarray, n_types: int) -> list[np.ndarray]:
    """Map input type ids to vocabulary ids (-1 = dropped) and drop the rest."""
    table = np.full(n_types, -1, dtype=np.int64)
    table[keep] = np.arange(keep.size)
    out = []
    for tokens in docs:
        mapped = table[tokens] if tokens.size else tokens.astype(np.int64)
        out.append(mapped[mapped >= 0].astype(np.int32))
    return out


def prepare(inputs: list[str], out: str | Path, opts: PrepareOptions) -> dict:
    """Build a corpus store from ``inputs``; returns its manifest."""
    opts.check()
    if not inputs:
        raise CorpusUsageError("no input given; name files, a folder, a .jsonl file, a UCI "
                               "docword file, or - for standard input")
    # before reading anything: an output that will be refused is refused now
    named = [*inputs, opts.vocab, opts.vocab_list, opts.test_observed, opts.test_heldout,
             opts.meta_file, opts.stopwords]
    check_output(Path(out), opts.force, [str(p) for p in named if p is not None])
    fmt = readers.detect_format(inputs) if opts.format == "auto" else opts.format
    if fmt not in readers.FORMATS:
        raise UsageError(f"--format must be one of {', '.join(readers.FORMATS)}; got {fmt}")
    if opts.test_observed and fmt != "uci":
        raise UsageError("--test-observed/--test-heldout import a published split and need UCI "
                         "docword input (--format uci)")
    if opts.vocab is not None and fmt != "uci":
        raise UsageError(f"--vocab names the vocabulary of UCI docword input, not of {fmt} "
                         f"input; to fix the vocabulary of text use --vocab-list")
    if opts.vocab_list is not None and fmt == "uci":
        raise UsageError("--vocab-list fixes the vocabulary of text input; UCI input comes with "
                         "its own (--vocab): drop --vocab-list, or choose words with --min-df, "
                         "--max-df, --stopwords or --vocab-size")
    stats = readers.ReadStats()
    imported = opts.test_observed is not None
    metas = None

    if fmt == "uci":
        if len(inputs) != 1:
            raise UsageError("UCI input is one docword file (plus --vocab)")
        bag = readers.read_uci(inputs[0], opts.vocab)
        type_names = bag.vocab
        all_docs = csr_to_tokens(bag.indptr, bag.indices, bag.counts)
        doc_ids = [str(i + 1) for i in range(len(all_docs))]
        stop = _stopword_set(opts.stopwords, default_on=False)
        if imported:
            obs_bag = readers.read_uci(opts.test_observed, opts.vocab or str(
                readers.find_uci_vocab(Path(inputs[0])) or ""))
            held_bag = readers.read_uci(opts.test_heldout, opts.vocab or str(
                readers.find_uci_vocab(Path(inputs[0])) or ""))
            if obs_bag.indptr.size != held_bag.indptr.size:
                raise CorpusError(f"{opts.test_heldout}: has {held_bag.indptr.size - 1} documents "
                                  f"but {opts.test_observed} has {obs_bag.indptr.size - 1}; the "
                                  f"two parts of a split must list the same test documents")
            train_docs = all_docs
            obs_docs = csr_to_tokens(obs_bag.indptr, obs_bag.indices, obs_bag.counts)
            held_docs = csr_to_tokens(held_bag.indptr, held_bag.indices, held_bag.counts)
            train_ids = doc_ids
            test_ids = [str(i + 1) for i in range(len(obs_docs))]
    else:
        fixed = read_vocab_list(opts.vocab_list) if opts.vocab_list else None
        all_docs, type_names, doc_ids, metas = _read_text_documents(inputs, fmt, opts, stats,
                                                                    fixed)
        stop = _stopword_set(opts.stopwords, default_on=fixed is None)

    n_read = len(all_docs)
    if n_read == 0:
        raise CorpusUsageError(readers.no_documents_message(inputs, stats))
    if opts.meta_file is not None:
        rows = rows_for_documents(read_meta_file(opts.meta_file), n_read,
                                  stats.skipped_positions, opts.meta_file)
        used = [name for name, _ in parse_meta_option(opts.meta)] if opts.meta else []
        if opts.split_field is not None:
            used.append(opts.split_field)
        metas = merge_meta_file(rows, metas, used, opts.meta_file)

    if opts.split_field is not None:
        test_mask = _split_from_field(opts.split_field, metas, doc_ids, inputs)
    if not imported:
        if opts.split_field is None:
            test_mask = choose_test_documents(n_read, opts.test_docs, opts.seed)
            _check_test_documents(int(test_mask.sum()), n_read, opts.test_docs)
        train_idx = np.flatnonzero(~test_mask)
        test_idx = np.flatnonzero(test_mask)
        train_docs = [all_docs[i] for i in train_idx]
    n_train_read = len(train_docs)
    df, cf = document_frequency(train_docs, len(type_names))
    if opts.vocab_list:
        keep = np.arange(len(type_names))   # the given vocabulary, in its order
        unseen = np.flatnonzero(df == 0)
        if unseen.size:
            log.warning("--vocab-list %s: %d of %d words never occur in the training documents "
                        "(%s); they stay in the vocabulary, their topic probabilities from "
                        "beta alone", opts.vocab_list, unseen.size, len(type_names),
                        ", ".join(type_names[i] for i in unseen[:5])
                        + (", ..." if unseen.size > 5 else ""))
    else:
        keep = select_vocabulary(type_names, df, cf, max(n_train_read, 1), min_df=opts.min_df,
                                 max_df=opts.max_df, vocab_size=opts.vocab_size, stopwords=stop)
    if keep.size == 0:
        raise CorpusUsageError(f"{', '.join(inputs)}: no word survives the vocabulary filters "
                               f"(--min-df, --max-df, --stopwords, --min-length); relax them")
    vocab = [type_names[i] for i in keep]

    train_mapped = _remap(train_docs, keep, len(type_names))
    if imported:
        obs_mapped = _remap(obs_docs, keep, len(type_names))
        held_mapped = _remap(held_docs, keep, len(type_names))
        test_before = [o.size + h.size for o, h in zip(obs_docs, held_docs)]
        oov_test = sum(test_before) - sum(o.size + h.size for o, h in zip(obs_mapped, held_mapped))
        test_keep = [i for i in range(len(obs_mapped)) if obs_mapped[i].size + held_mapped[i].size]
        obs_mapped = [obs_mapped[i] for i in test_keep]
        held_mapped = [held_mapped[i] for i in test_keep]
        test_ids = [test_ids[i] for i in test_keep]
        dropped_test = len(obs_docs) - len(test_keep)
        test_meta = None
        train_ids_all = train_ids
        train_meta_all = metas
    else:
        test_full = _remap([all_docs[i] for i in test_idx], keep, len(type_names))
        oov_test = sum(all_docs[i].size for i in test_idx) - sum(t.size for t in test_full)
        test_keep = [j for j, t in enumerate(test_full) if t.size]
        dropped_test = len(test_full) - len(test_keep)
        test_full = [test_full[j] for j in test_keep]
        obs_mapped, held_mapped = split_tokens(test_full, opts.heldout_fraction, opts.seed)
        if test_full and not any(h.size for h in held_mapped):
            log.warning("--heldout-fraction %g holds out no token of the %d test document(s) "
                        "(each has fewer than 1/%g tokens): there will be nothing to score; "
                        "raise it", opts.heldout_fraction, len(test_full), opts.heldout_fraction)
        test_ids = [doc_ids[test_idx[j]] for j in test_keep]
        test_meta = [metas[test_idx[j]] for j in test_keep] if metas is not None else None
        train_ids_all = [doc_ids[i] for i in train_idx]
        train_meta_all = [metas[i] for i in train_idx] if metas is not None else None

    train_keep = [j for j, t in enumerate(train_mapped) if t.size]
    dropped_train = len(train_mapped) - len(train_keep)
    train_mapped = [train_mapped[j] for j in train_keep]
    train_ids_kept = [train_ids_all[j] for j in train_keep]
    train_meta = [train_meta_all[j] for j in train_keep] if train_meta_all is not None else None
    if not train_mapped:
        raise CorpusUsageError(f"{', '.join(inputs)}: every training document is empty after "
                               f"filtering; relax --min-df/--stopwords or give more text")

    train_held = None
    unseen_dropped: dict[str, int] = {}
    if opts.heldout_train_fraction is not None:
        # Protocol B (§11.1): the observed parts are the training corpus
        train_mapped, train_held = split_train_tokens(train_mapped, opts.heldout_train_fraction,
                                                      opts.seed)
        vocab, (train_mapped, train_held, obs_mapped, held_mapped), unseen_dropped = \
            _drop_unobserved_words(vocab, train_mapped, [train_held, obs_mapped, held_mapped])
        if unseen_dropped:
            oov_test += unseen_dropped["test"]
            test_keep = [j for j, (o, h) in enumerate(zip(obs_mapped, held_mapped))
                         if o.size + h.size]
            dropped_test += len(obs_mapped) - len(test_keep)
            obs_mapped = [obs_mapped[j] for j in test_keep]
            held_mapped = [held_mapped[j] for j in test_keep]
            test_ids = [test_ids[j] for j in test_keep]
            test_meta = [test_meta[j] for j in test_keep] if test_meta is not None else None

    V = len(vocab)
    arrays = {}
    features = None
    if opts.meta is not None:
        where = opts.meta_file or ", ".join(inputs)
        if train_meta is None:
            raise CorpusUsageError(f"{where}: --meta needs document metadata: JSONL fields (a "
                                   f".jsonl file, or --format jsonl for standard input) or a "
                                   f"--meta-file")
        encoding = fit_encoding(parse_meta_option(opts.meta), train_meta, train_ids_kept, where)
        arrays["train_features"], train_stats = encoding.encode(train_meta, train_ids_kept, where)
        if test_meta is None and obs_mapped:
            raise CorpusUsageError(f"{where}: --meta needs metadata for the test documents too")
        arrays["test_features"], test_stats = encoding.encode(test_meta or [], test_ids, where)
        features = dict(encoding.to_json(), train=train_stats, test=test_stats)
    if train_held is not None:
        tptr, twords = tokens_to_ptr(train_held)
        (arrays["train_held_indptr"], arrays["train_held_indices"],
         arrays["train_held_counts"]) = ptr_to_csr(tptr, twords, V)
    ptr, words = tokens_to_ptr(train_mapped)
    arrays["train_doc_ptr"], arrays["train_words"] = ptr, words
    (arrays["train_indptr"], arrays["train_indices"],
     arrays["train_counts"]) = ptr_to_csr(ptr, words, V)
    ptr, words = tokens_to_ptr(obs_mapped)
    arrays["test_obs_doc_ptr"], arrays["test_obs_words"] = ptr, words
    (arrays["test_obs_indptr"], arrays["test_obs_indices"],
     arrays["test_obs_counts"]) = ptr_to_csr(ptr, words, V)
    hptr, hwords = tokens_to_ptr(held_mapped)
    (arrays["test_held_indptr"], arrays["test_held_indices"],
     arrays["test_held_counts"]) = ptr_to_csr(hptr, hwords, V)

    counts = {
        "documents_read": n_read + (len(obs_docs) if imported else 0),
        "train_documents": len(train_mapped),
        "test_documents": len(obs_mapped),
        "vocabulary": V,
        "train_tokens": int(arrays["train_doc_ptr"][-1]),
        "test_observed_tokens": int(arrays["test_obs_doc_ptr"][-1]),
        "test_heldout_tokens": int(hptr[-1]),
        "test_oov_tokens_dropped": int(oov_test),
        "empty_documents_dropped": {"train": dropped_train, "test": dropped_test},
        "undecodable_skipped": stats.skipped_undecodable,
    }
    split = ({"protocol": "imported", "observed": str(opts.test_observed),
              "heldout": str(opts.test_heldout)} if imported else
             {"protocol": "document-completion", "seed": opts.seed, "split_field":
              opts.split_field, "heldout_fraction": opts.heldout_fraction,
              "test_docs": "from field"} if opts.split_field else
             {"protocol": "document-completion", "seed": opts.seed,
              "test_docs": opts.test_docs, "heldout_fraction": opts.heldout_fraction})
    if train_held is not None:
        counts["train_heldout_tokens"] = int(sum(t.size for t in train_held))
        counts["unobserved_words_dropped"] = unseen_dropped.get("words", 0)
        counts["train_heldout_tokens_dropped"] = unseen_dropped.get("train_heldout", 0)
        split["heldout_train_fraction"] = opts.heldout_train_fraction
        split["train_protocol"] = "token-holdout"
    manifest = {
        "source": {"inputs": [str(i) for i in inputs], "format": fmt},
        "options": {"min_length": opts.min_length, "min_df": opts.min_df, "max_df": opts.max_df,
                    "vocab_size": opts.vocab_size, "stopwords": opts.stopwords or "default",
                    "vocab_list": opts.vocab_list},
        "counts": counts,
        "split": split,
        "vocab_sha256": vocab_hash(vocab),
    }
    if features is not None:
        manifest["features"] = features
    return write_store(Path(out), arrays, vocab, manifest, train_ids=train_ids_kept,
                       test_ids=test_ids, train_meta=train_meta, test_meta=test_meta,
                       force=opts.force)
