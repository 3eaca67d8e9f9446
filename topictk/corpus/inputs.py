"""Every input format, read one way: text documents (plain text, folders, JSONL, CSV/TSV, or
held in memory) or a bag of words over a vocabulary (UCI, LDA-C, Matrix Market)."""
from __future__ import annotations

from collections.abc import Iterator

from topictk.corpus import bags, readers, tables
from topictk.corpus.memory import InMemory
from topictk.corpus.readers import BagOfWords, ReadStats, TextDocument
from topictk.corpus.tables import TableOptions
from topictk.errors import CorpusUsageError

_BAG_READERS = {"uci": readers.read_uci, "ldac": bags.read_ldac, "mm": bags.read_mm}
_NAMES = {"uci": "UCI docword", "ldac": "LDA-C", "mm": "Matrix Market"}


def read_documents(inputs: list[str], fmt: str, errors: str, stats: ReadStats,
                   table: TableOptions | None = None,
                   documents: InMemory | None = None) -> Iterator[TextDocument]:
    """The documents of every input in order, read as ``fmt`` (a text format); ``table``
    names the columns of CSV/TSV input; ``documents`` are those held in memory (``fmt``
    memory.FORMAT), read instead of ``inputs``."""
    if documents is not None:
        yield from documents.read(stats)
        return
    if fmt not in ("csv", "tsv"):
        yield from readers.read_text_documents(inputs, fmt, errors, stats)
        return
    for source in inputs:
        yield from tables.read_table(source, fmt, errors, stats, table or TableOptions())


def read_bag(inputs: list[str], fmt: str, vocab: str | None) -> BagOfWords:
    """The one bag-of-words file of ``inputs`` in ``fmt`` (one of readers.BAG_FORMATS) with
    its vocabulary (``vocab``, or the file found beside it)."""
    if len(inputs) != 1:
        raise CorpusUsageError(f"{_NAMES[fmt]} input is one file (plus --vocab); got "
                               f"{len(inputs)}: {', '.join(inputs)}")
    return _BAG_READERS[fmt](inputs[0], vocab)
