"""``topictk prepare``: read input, tokenise, choose the vocabulary, split, write the store."""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from topictk.corpus import inputs as input_formats
from topictk.corpus import memory, readers
from topictk.corpus import phrases as phrase_rules
from topictk.corpus.features import (
    fit_encoding,
    merge_meta_file,
    parse_meta_option,
    read_meta_file,
    rows_for_documents,
)
from topictk.corpus.splits import choose_test_documents, split_tokens, split_train_tokens
from topictk.corpus.preprocess import (
    Preprocessing,
    stopword_file,
    stopword_words,
    stopwords_record,
)
from topictk.corpus.tables import TableOptions, check_table_options
from topictk.corpus.timeslices import Rule, TimeSlices
from topictk.corpus.store import check_output, csr_to_tokens, ptr_to_csr, tokens_to_ptr, write_store
from topictk.corpus.vocab import document_frequency, select_vocabulary, vocab_hash
from topictk.errors import CorpusError, CorpusUsageError, UsageError
from topictk.limits import text_lines

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
    time_column: str | None = None       # metadata field of each document's time (slices)
    time_bins: str | None = None         # the rule that makes slices of it (None: year)
    forecast: bool = False               # the last slice's documents are the test documents
    vocab_list: str | None = None        # a fixed vocabulary, one word per line
    table: TableOptions | None = None    # CSV/TSV columns and delimiter (None: the defaults)
    duplicate_ids: str = "refuse"        # a document id given twice: refuse, or rename ID~2
    snippets: int = 0                    # characters of each training text kept (0: none)
    token_pattern: str | None = None     # a regular expression whose matches are the tokens
    case: str = "fold"                   # fold (lower-case) or keep
    lemmatize: str | None = None         # a simplemma language code
    phrases: bool = False                # join collocations learned on the training split
    phrase_min_count: int = 20
    phrase_threshold: float = 0.5

    def preprocessing(self) -> Preprocessing:
        """Text -> tokens as these options ask (phrases are learned later)."""
        return Preprocessing(token_pattern=self.token_pattern, case=self.case,
                             min_length=self.min_length, lemmatize=self.lemmatize)

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
        if self.forecast:
            if self.time_column is None:
                raise UsageError("--forecast makes the last time slice's documents the test "
                                 "documents: add --time-column FIELD")
            if self.test_docs is not None or self.split_field is not None:
                raise UsageError("--forecast chooses the test documents (every document of "
                                 "the last time slice): drop "
                                 + ("--test-docs" if self.test_docs is not None
                                    else "--split-field"))
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
        if self.duplicate_ids not in readers.DUPLICATE_IDS:
            raise UsageError(f"--duplicate-ids must be {' or '.join(readers.DUPLICATE_IDS)}; "
                             f"got {self.duplicate_ids}")
        if self.snippets < 0:
            raise UsageError(f"--snippets must be >= 0 characters (0 keeps no text); "
                             f"got {self.snippets}")
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
        self.preprocessing()     # a bad --token-pattern, --case or --lemmatize stops here
        if self.phrases:
            problem = phrase_rules.check_options(self.phrase_min_count, self.phrase_threshold)
            if problem:
                raise UsageError(problem)
            if self.vocab_list is not None:
                raise UsageError("--phrases makes new words, --vocab-list fixes the words; "
                                 "drop one of them")
        if (self.meta_file is not None and self.meta is None and self.split_field is None
                and self.time_column is None):
            raise UsageError(f"--meta-file {self.meta_file}: nothing uses it; add --meta FIELD,... "
                             f"to keep fields as features (or --split-field FIELD, or "
                             f"--time-column FIELD)")
        if self.time_bins is not None and self.time_column is None:
            raise UsageError("--time-bins makes slices of the times of --time-column FIELD: "
                             "add --time-column")

        if self.time_column is not None:
            Rule.parse(self.time_bins)
            if self.test_observed is not None:
                raise UsageError("--time-column needs a time for every document, and an "
                                 "imported split (--test-observed/--test-heldout) has no "
                                 "metadata for its test documents: drop one of them")


def read_vocab_list(path: str) -> list[str]:
    """A fixed vocabulary: one word per line, no empty lines, no duplicates."""
    file = Path(path)
    if file.is_dir():
        raise CorpusUsageError(f"--vocab-list {file}: is a folder; give a file with one word "
                               f"per line")
    if not file.exists():
        raise CorpusUsageError(f"{file}: vocabulary list not found")
    try:
        words = [line.strip() for line in text_lines(file.read_text(encoding="utf-8"))]
    except OSError as exc:
        raise CorpusUsageError(f"{file}: vocabulary list cannot be read "
                               f"({exc.strerror or exc}); give a readable file") from None
    except UnicodeDecodeError:
        raise CorpusError(f"{file}: vocabulary list is not valid UTF-8") from None
    if not words:
        raise CorpusUsageError(f"{file}: vocabulary list is empty")
    readers.check_distinct_words(words, file, "vocabulary list")
    return words


@dataclass
class DocumentSet:
    """Documents as token-id arrays with their ids and (optionally) metadata, kept in
    lockstep; ``held`` is each document's held-out part once its tokens are split."""

    tokens: list[np.ndarray]
    ids: list[str]
    meta: list[dict] | None = None
    held: list[np.ndarray] | None = None
    snippets: list[str] | None = None    # prepare --snippets: the start of each text

    def __len__(self) -> int:
        return len(self.tokens)

    def n_tokens(self) -> int:
        held = sum(h.size for h in self.held) if self.held is not None else 0
        return sum(t.size for t in self.tokens) + held

    def take(self, indices) -> DocumentSet:
        """The documents at ``indices``, in that order."""
        return DocumentSet(
            tokens=[self.tokens[i] for i in indices], ids=[self.ids[i] for i in indices],
            meta=[self.meta[i] for i in indices] if self.meta is not None else None,
            held=[self.held[i] for i in indices] if self.held is not None else None,
            snippets=([self.snippets[i] for i in indices] if self.snippets is not None
                      else None))

    def keep_nonempty(self) -> DocumentSet:
        """The documents with at least one token (in either part)."""
        held = self.held if self.held is not None else [None] * len(self.tokens)
        return self.take([i for i, (t, h) in enumerate(zip(self.tokens, held))
                          if t.size + (h.size if h is not None else 0)])

    def remap(self, keep: np.ndarray, n_types: int) -> DocumentSet:
        """Tokens as ids of the vocabulary ``keep`` (input type ids), the others dropped."""
        held = _remap(self.held, keep, n_types) if self.held is not None else None
        return replace(self, tokens=_remap(self.tokens, keep, n_types), held=held)


@dataclass
class _Input:
    """What was read: every input document over the input's word types, the stop words that
    apply to it, and with an imported split its test documents (observed and held-out
    parts)."""

    docs: DocumentSet
    type_names: list[str]
    stopwords: frozenset[str]
    imported_test: DocumentSet | None = None


@dataclass
class _Dropped:
    """What filtering removed, for the manifest's counts."""

    test_oov_tokens: int = 0
    train_documents: int = 0
    test_documents: int = 0
    unobserved: dict = field(default_factory=dict)   # Protocol B: words and tokens dropped


_SPACES = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def snippet_of(text: str, n_chars: int) -> str:
    """The first ``n_chars`` characters (code points) of ``text`` cleaned up for display:
    control characters dropped, every run of white space (line breaks included) one
    space, no space at either end."""
    return _SPACES.sub(" ", _CONTROL.sub("", text)).strip()[:n_chars].rstrip()


def _read_text_documents(inputs: list[str], fmt: str, opts: PrepareOptions,
                         stats: readers.ReadStats, fixed_vocab: list[str] | None = None,
                         documents: memory.InMemory | None = None,
                         ) -> tuple[DocumentSet, list[str]]:
    """Tokenised documents as id arrays over an input type table (or over ``fixed_vocab``,
    whose out-of-vocabulary tokens are dropped as they are read), and that table's words."""
    type_ids: dict[str, int] = {w: i for i, w in enumerate(fixed_vocab)} if fixed_vocab else {}
    docs, ids, metas, origins, snippets = [], [], [], [], []
    words = opts.preprocessing().words
    for doc in input_formats.read_documents(inputs, fmt, opts.encoding_errors, stats,
                                            opts.table, documents):
        tokens = words(doc.text)
        if opts.snippets:
            snippets.append(snippet_of(doc.text, opts.snippets))
        if fixed_vocab:
            known = [type_ids[t] for t in tokens if t in type_ids]
            docs.append(np.array(known, dtype=np.int32))
        else:
            docs.append(np.fromiter((type_ids.setdefault(t, len(type_ids)) for t in tokens),
                                    dtype=np.int32, count=len(tokens)))
        ids.append(doc.id)
        metas.append(doc.meta)
        origins.append(doc.origin)
    ids = readers.distinct_ids(ids, origins, opts.duplicate_ids)
    names = [""] * len(type_ids)
    for name, i in type_ids.items():
        names[i] = name
    return (DocumentSet(docs, ids, metas if any(metas) else None,
                        snippets=snippets if opts.snippets else None), names)


def _bag_tokens(bag: readers.BagOfWords) -> list[np.ndarray]:
    return csr_to_tokens(bag.indptr, bag.indices, bag.counts)


def _last_document(bag: readers.BagOfWords) -> int:
    """The largest 1-based id of a document of ``bag`` that has an entry (0: none has)."""
    nonempty = np.flatnonzero(np.diff(bag.indptr))
    return int(nonempty[-1]) + 1 if nonempty.size else 0


def _read_bag_input(inputs: list[str], fmt: str, opts: PrepareOptions) -> _Input:
    """A bag-of-words file (UCI docword, LDA-C, Matrix Market) and, with UCI input and
    ``--test-observed/--test-heldout``, the imported test documents; documents are numbered
    from 1 in each file."""
    bag = input_formats.read_bag(inputs, fmt, opts.vocab)
    tokens = _bag_tokens(bag)
    read = _Input(DocumentSet(tokens, [str(i + 1) for i in range(len(tokens))]), bag.vocab,
                  stopword_words(opts.stopwords, default_on=False))
    if opts.test_observed is not None:
        vocab = opts.vocab or str(readers.find_uci_vocab(Path(inputs[0])) or "")
        obs_bag = readers.read_uci(opts.test_observed, vocab, check_documents=False)
        held_bag = readers.read_uci(opts.test_heldout, vocab, check_documents=False)
        if obs_bag.indptr.size != held_bag.indptr.size:
            raise CorpusError(f"{opts.test_heldout}: has {held_bag.indptr.size - 1} documents "
                              f"but {opts.test_observed} has {obs_bag.indptr.size - 1}; the "
                              f"two parts of a split must list the same test documents")
        # a test document may have entries in one part only: D is checked against both
        last = max(_last_document(obs_bag), _last_document(held_bag))
        readers.check_document_count(Path(opts.test_observed), obs_bag.indptr.size - 1, last)
        observed = _bag_tokens(obs_bag)
        read.imported_test = DocumentSet(observed, [str(i + 1) for i in range(len(observed))],
                                         held=_bag_tokens(held_bag))
    return read


def _read_input(inputs: list[str], fmt: str, opts: PrepareOptions,
                stats: readers.ReadStats, documents: memory.InMemory | None = None) -> _Input:
    """Every input document, tokenised, with the metadata of ``--meta-file`` merged in."""
    if fmt in readers.BAG_FORMATS:
        read = _read_bag_input(inputs, fmt, opts)
    else:
        fixed = read_vocab_list(opts.vocab_list) if opts.vocab_list else None
        docs, type_names = _read_text_documents(inputs, fmt, opts, stats, fixed, documents)
        read = _Input(docs, type_names, stopword_words(opts.stopwords, default_on=fixed is None))
    n_read = len(read.docs)
    if n_read == 0:
        raise CorpusUsageError(readers.no_documents_message(inputs, stats))
    if opts.meta_file is not None:
        rows = rows_for_documents(read_meta_file(opts.meta_file), n_read,
                                  stats.skipped_positions, opts.meta_file)
        used = [name for name, _ in parse_meta_option(opts.meta)] if opts.meta else []
        if opts.split_field is not None:
            used.append(opts.split_field)
        if opts.time_column is not None:
            used.append(opts.time_column)
        read.docs.meta = merge_meta_file(rows, read.docs.meta, used, opts.meta_file)
    return read


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



def _check_formats(inputs: list[str], out: str | Path, opts: PrepareOptions,
                   in_memory: bool = False) -> str:
    """Refuse, before reading anything, an output that will be refused and options that do
    not fit the input format; returns the format (``in_memory``: memory.FORMAT, the inputs
    only naming documents held in memory)."""
    if not inputs:
        raise CorpusUsageError("no input given; name files, a folder, a .jsonl file, a UCI "
                               "docword file, or - for standard input")
    given: dict = {}
    for source in inputs:
        same = source if source == "-" else Path(source).resolve()
        if same in given:
            raise CorpusUsageError(f"{source}: given twice as input (also as {given[same]}); "
                                   f"its documents would be read twice: give it once")
        given[same] = source
    named = [*inputs, opts.vocab, opts.vocab_list, opts.test_observed, opts.test_heldout,
             opts.meta_file, stopword_file(opts.stopwords)]
    if in_memory:       # the inputs only name the documents: no file of theirs to protect
        named = named[len(inputs):]
    check_output(Path(out), opts.force, [str(p) for p in named if p is not None])
    if in_memory:
        fmt = memory.check_format(opts.format)
    elif opts.format == "auto":
        fmt = readers.detect_format(inputs)
    else:
        fmt = opts.format
    if fmt not in (*readers.FORMATS, memory.FORMAT):
        raise UsageError(f"--format must be one of {', '.join(readers.FORMATS)}; got {fmt}")
    if opts.test_observed and fmt != "uci":
        raise UsageError("--test-observed/--test-heldout import a published split and need UCI "
                         "docword input (--format uci)")
    if opts.vocab is not None and fmt not in readers.BAG_FORMATS:
        raise UsageError(f"--vocab names the vocabulary of bag-of-words input (UCI, LDA-C, "
                         f"Matrix Market), not of {fmt} input; to fix the vocabulary of text "
                         f"use --vocab-list")
    if opts.snippets and fmt in readers.BAG_FORMATS:
        raise UsageError(f"--snippets keeps the start of each document's text; {fmt} input is "
                         f"a bag of words with no text: drop --snippets")
    if fmt in readers.BAG_FORMATS:
        given = [name for name, on in (("--token-pattern", opts.token_pattern is not None),
                                       ("--case keep", opts.case != "fold"),
                                       ("--lemmatize", opts.lemmatize is not None),
                                       ("--phrases", opts.phrases)) if on]
        if given:
            raise UsageError(f"{' and '.join(given)} shape(s) the tokens of text; {fmt} input is "
                             f"a bag of words already counted: drop {' and '.join(given)}")
    if opts.vocab_list is not None and fmt in readers.BAG_FORMATS:
        name = {"uci": "UCI", "ldac": "LDA-C", "mm": "Matrix Market"}[fmt]
        raise UsageError(f"--vocab-list fixes the vocabulary of text input; {name} input comes "
                         f"with its own (--vocab): drop --vocab-list, or choose words with "
                         f"--min-df, --max-df, --stopwords or --vocab-size")
    check_table_options(opts.table, fmt)
    return fmt


def _split_documents(read: _Input, inputs: list[str], opts: PrepareOptions,
                     slices: np.ndarray | None = None) -> tuple[DocumentSet, DocumentSet]:
    """The training and test documents: the imported split, the split field's, or a random
    choice of test documents, drawn slice by slice when the documents have time ``slices``.
    Test documents are whole here, except imported ones."""
    docs = read.docs
    if opts.split_field is not None:
        test_mask = _split_from_field(opts.split_field, docs.meta, docs.ids, inputs)
    if read.imported_test is not None:
        return docs, read.imported_test
    if opts.forecast:
        test_mask = slices == slices.max()
        if test_mask.all():
            raise CorpusUsageError(f"--forecast: every document is in the one time slice "
                                   f"{int(slices.max())}, so none is left to train on; make "
                                   f"more slices (--time-bins)")
    elif opts.split_field is None:
        test_mask = choose_test_documents(len(docs), opts.test_docs, opts.seed, strata=slices)
        _check_test_documents(int(test_mask.sum()), len(docs), opts.test_docs)
    return docs.take(np.flatnonzero(~test_mask)), docs.take(np.flatnonzero(test_mask))


def _choose_vocabulary(train: DocumentSet, read: _Input, inputs: list[str],
                       opts: PrepareOptions) -> np.ndarray:
    """The input type ids kept as the vocabulary, from the training documents' frequencies."""
    type_names = read.type_names
    df, cf = document_frequency(train.tokens, len(type_names))
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
        keep = select_vocabulary(type_names, df, cf, max(len(train), 1), min_df=opts.min_df,
                                 max_df=opts.max_df, vocab_size=opts.vocab_size,
                                 stopwords=_stop_names(read, opts))
    if keep.size == 0:
        raise CorpusUsageError(f"{', '.join(inputs)}: no word survives the vocabulary filters "
                               f"(--min-df, --max-df, --stopwords, --min-length); relax them")
    return keep


def _stop_names(read: _Input, opts: PrepareOptions) -> frozenset[str]:
    """The stop words as the input's words: with ``--case keep``, every spelling of a stop
    word whatever its case (the lists are lower-case)."""
    if opts.case == "fold" or not read.stopwords:
        return read.stopwords
    return frozenset(n for n in read.type_names if n.lower() in read.stopwords)


def _join_phrases(train: DocumentSet, test: DocumentSet, read: _Input,
                  opts: PrepareOptions) -> tuple[DocumentSet, DocumentSet, dict]:
    """``--phrases``: collocations learned on the training documents only, then joined in
    the training and the (still whole) test documents; the joined words are added to the
    input's words. Returns the documents and the manifest's record."""
    names = read.type_names
    found = phrase_rules.learn(train.tokens, names, _stop_names(read, opts),
                               opts.phrase_min_count, opts.phrase_threshold)
    listed = [phrase_rules.Phrase(tuple(names[w] for w in ids), count, npmi).to_json()
              for ids, count, npmi in found]
    train = replace(train, tokens=phrase_rules.join_documents(train.tokens, names, found))
    test = replace(test, tokens=phrase_rules.join_documents(test.tokens, names, found))
    log.info("--phrases: %d pairs and %d triples learned on %d training documents",
             sum(len(p[0]) == 2 for p in found), sum(len(p[0]) == 3 for p in found), len(train))
    return train, test, {"min_count": opts.phrase_min_count,
                         "threshold": opts.phrase_threshold, "learned_on": "train",
                         "joiner": phrase_rules.JOINER, "list": listed}


def _test_parts(test: DocumentSet, keep: np.ndarray, n_types: int, opts: PrepareOptions,
                dropped: _Dropped) -> DocumentSet:
    """Test documents over the vocabulary, empty ones dropped; whole documents are split into
    observed and held-out parts (an imported split comes with its parts)."""
    mapped = test.remap(keep, n_types)
    dropped.test_oov_tokens = test.n_tokens() - mapped.n_tokens()
    kept = mapped.keep_nonempty()
    dropped.test_documents = len(mapped) - len(kept)
    if kept.held is not None:
        return kept
    observed, held = split_tokens(kept.tokens, opts.heldout_fraction, opts.seed)
    if kept.tokens and not any(h.size for h in held):
        log.warning("--heldout-fraction %g holds out no token of the %d test document(s) "
                    "(each has fewer than 1/%g tokens): there will be nothing to score; "
                    "raise it", opts.heldout_fraction, len(kept), opts.heldout_fraction)
    return replace(kept, tokens=observed, held=held)


def _train_documents(train: DocumentSet, keep: np.ndarray, n_types: int, inputs: list[str],
                     dropped: _Dropped) -> DocumentSet:
    """Training documents over the vocabulary, empty ones dropped."""
    mapped = train.remap(keep, n_types)
    kept = mapped.keep_nonempty()
    dropped.train_documents = len(mapped) - len(kept)
    if not kept.tokens:
        raise CorpusUsageError(f"{', '.join(inputs)}: every training document is empty after "
                               f"filtering; relax --min-df/--stopwords or give more text")
    return kept


def _hold_out_training_tokens(train: DocumentSet, test: DocumentSet, vocab: list[str],
                              opts: PrepareOptions, dropped: _Dropped):
    """Protocol B (§11.1): the observed parts of the training documents are the training
    corpus; words they never show are dropped (see :func:`_drop_unobserved_words`), and with
    them test documents left empty. Returns (train, test, vocab)."""
    observed, held = split_train_tokens(train.tokens, opts.heldout_train_fraction, opts.seed)
    vocab, (observed, held, test_observed, test_held), dropped.unobserved = \
        _drop_unobserved_words(vocab, observed, [held, test.tokens, test.held])
    train = replace(train, tokens=observed, held=held)
    test = replace(test, tokens=test_observed, held=test_held)
    if dropped.unobserved:
        dropped.test_oov_tokens += dropped.unobserved["test"]
        kept = test.keep_nonempty()
        dropped.test_documents += len(test) - len(kept)
        test = kept
    return train, test, vocab


def _feature_arrays(train: DocumentSet, test: DocumentSet, inputs: list[str],
                    opts: PrepareOptions, time_slices: TimeSlices | None = None
                    ) -> tuple[dict, dict | None]:
    """``--meta``: the documents' feature matrices, encoded as fitted on the training
    documents (a ``FIELD:slice`` field by the ``time_slices`` of ``--time-column FIELD``),
    and the encoding for the manifest."""
    if opts.meta is None:
        return {}, None
    where = opts.meta_file or ", ".join(inputs)
    if train.meta is None:
        raise CorpusUsageError(f"{where}: --meta needs document metadata: JSONL fields (a "
                               f".jsonl file, or --format jsonl for standard input) or a "
                               f"--meta-file")
    encoding = fit_encoding(parse_meta_option(opts.meta), train.meta, train.ids, where,
                            time_slices)
    arrays = {}
    arrays["train_features"], train_stats = encoding.encode(train.meta, train.ids, where)
    if test.meta is None and len(test):
        raise CorpusUsageError(f"{where}: --meta needs metadata for the test documents too")
    arrays["test_features"], test_stats = encoding.encode(test.meta or [], test.ids, where)
    return arrays, dict(encoding.to_json(), train=train_stats, test=test_stats)


def _add_arrays(arrays: dict, name: str, docs: list[np.ndarray], n_words: int,
                tokens: bool) -> None:
    """``docs`` as CSR counts ``NAME_indptr/indices/counts`` and, with ``tokens``, as token
    lists ``NAME_doc_ptr/words``."""
    ptr, words = tokens_to_ptr(docs)
    if tokens:
        arrays[f"{name}_doc_ptr"], arrays[f"{name}_words"] = ptr, words
    (arrays[f"{name}_indptr"], arrays[f"{name}_indices"],
     arrays[f"{name}_counts"]) = ptr_to_csr(ptr, words, n_words)


def _store_arrays(train: DocumentSet, test: DocumentSet, n_words: int, arrays: dict) -> dict:
    """The token and count arrays of the store, added to ``arrays`` (the features)."""
    if train.held is not None:
        _add_arrays(arrays, "train_held", train.held, n_words, tokens=False)
    _add_arrays(arrays, "train", train.tokens, n_words, tokens=True)
    _add_arrays(arrays, "test_obs", test.tokens, n_words, tokens=True)
    _add_arrays(arrays, "test_held", test.held, n_words, tokens=False)
    if train.snippets is not None:
        arrays["train_snippet_ptr"], arrays["train_snippet_text"] = snippet_arrays(
            train.snippets)
    return arrays


def snippet_arrays(snippets: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Texts as one UTF-8 blob (uint8) and the byte offsets of each (int64, D + 1)."""
    encoded = [t.encode("utf-8") for t in snippets]
    ptr = np.zeros(len(encoded) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(b) for b in encoded]) if encoded else []
    return ptr, np.frombuffer(b"".join(encoded), dtype=np.uint8)


def _manifest(inputs: list[str], fmt: str, opts: PrepareOptions, vocab: list[str],
              n_read: int, train: DocumentSet, test: DocumentSet, dropped: _Dropped,
              stats: readers.ReadStats) -> dict:
    """The store's description: source, options, counts, split protocol and vocabulary hash
    (``write_store`` adds the arrays' digests)."""
    counts = {
        "documents_read": n_read,
        "train_documents": len(train),
        "test_documents": len(test),
        "vocabulary": len(vocab),
        "train_tokens": int(sum(t.size for t in train.tokens)),
        "test_observed_tokens": int(sum(t.size for t in test.tokens)),
        "test_heldout_tokens": int(sum(h.size for h in test.held)),
        "test_oov_tokens_dropped": int(dropped.test_oov_tokens),
        "empty_documents_dropped": {"train": dropped.train_documents,
                                    "test": dropped.test_documents},
        "undecodable_skipped": stats.skipped_undecodable,
    }
    split = ({"protocol": "imported", "observed": str(opts.test_observed),
              "heldout": str(opts.test_heldout)} if opts.test_observed is not None else
             {"protocol": "document-completion", "seed": opts.seed, "split_field":
              opts.split_field, "heldout_fraction": opts.heldout_fraction,
              "test_docs": "from field"} if opts.split_field else
             {"protocol": "forecast", "seed": opts.seed, "test_docs": "last time slice",
              "heldout_fraction": opts.heldout_fraction} if opts.forecast else
             {"protocol": "document-completion", "seed": opts.seed,
              "test_docs": opts.test_docs, "heldout_fraction": opts.heldout_fraction})
    if train.held is not None:
        counts["train_heldout_tokens"] = int(sum(t.size for t in train.held))
        counts["unobserved_words_dropped"] = dropped.unobserved.get("words", 0)
        counts["train_heldout_tokens_dropped"] = dropped.unobserved.get("train_heldout", 0)
        split["heldout_train_fraction"] = opts.heldout_train_fraction
        split["train_protocol"] = "token-holdout"
    return {
        "source": {"inputs": [str(i) for i in inputs], "format": fmt},
        "options": {"min_length": opts.min_length, "min_df": opts.min_df, "max_df": opts.max_df,
                    "vocab_size": opts.vocab_size, "stopwords": opts.stopwords or "default",
                    "vocab_list": opts.vocab_list},
        "counts": counts,
        "split": split,
        "vocab_sha256": vocab_hash(vocab),
    }


def prepare(inputs: list[str], out: str | Path, opts: PrepareOptions,
            documents: memory.InMemory | None = None) -> dict:
    """Build a corpus store from ``inputs``, or from ``documents`` held in memory (``inputs``
    then only names them, in messages and the manifest); returns its manifest."""
    opts.check()
    fmt = _check_formats(inputs, out, opts, in_memory=documents is not None)
    stats = readers.ReadStats()
    read = _read_input(inputs, fmt, opts, stats, documents)
    n_read = len(read.docs) + (len(read.imported_test) if read.imported_test is not None else 0)
    time_slices, slices = None, None
    where = opts.meta_file or ", ".join(inputs)
    if opts.time_column is not None:
        time_slices, slices = TimeSlices.fit(opts.time_column, opts.time_bins, read.docs.meta,
                                             read.docs.ids, where)
    train, test = _split_documents(read, inputs, opts, slices)
    phrases = None
    if opts.phrases:
        train, test, phrases = _join_phrases(train, test, read, opts)
    keep = _choose_vocabulary(train, read, inputs, opts)
    vocab = [read.type_names[i] for i in keep]
    dropped = _Dropped()
    test = _test_parts(test, keep, len(read.type_names), opts, dropped)
    train = _train_documents(train, keep, len(read.type_names), inputs, dropped)
    if opts.heldout_train_fraction is not None:
        train, test, vocab = _hold_out_training_tokens(train, test, vocab, opts, dropped)
    arrays, features = _feature_arrays(train, test, inputs, opts, time_slices)
    if time_slices is not None:
        arrays["train_slices"] = time_slices.index(train.meta, train.ids, where)
        arrays["test_slices"] = time_slices.index(test.meta, test.ids, where)
    arrays = _store_arrays(train, test, len(vocab), arrays)
    manifest = _manifest(inputs, fmt, opts, vocab, n_read, train, test, dropped, stats)
    if features is not None:
        manifest["features"] = features
    if time_slices is not None:
        manifest["time"] = time_slices.to_json(arrays["train_slices"], arrays["test_slices"])
    manifest["preprocessing"] = opts.preprocessing().to_manifest(
        stopwords_record(opts.stopwords, read.stopwords,
                         default_on=fmt not in readers.BAG_FORMATS and not opts.vocab_list),
        phrases)
    if opts.snippets:
        manifest["snippets"] = {"characters": opts.snippets, "documents": "train"}
    return write_store(Path(out), arrays, vocab, manifest, train_ids=train.ids,
                       test_ids=test.ids, train_meta=train.meta, test_meta=test.meta,
                       force=opts.force)
