"""``topictk prepare``."""
from __future__ import annotations

import click

from topictk.cli.options import meta_file_option, single, table_from, table_options
from topictk.corpus.prepare import DEFAULT_HELDOUT_FRACTION, DEFAULT_TEST_DOCS, PrepareOptions
from topictk.corpus.prepare import prepare as prepare_corpus
from topictk.corpus.preprocess import CASES, stopword_words
from topictk.corpus.readers import DUPLICATE_IDS, FORMATS
from topictk.corpus.store import verify_store
from topictk.errors import UsageError
from topictk.rundir.guard import check_store_output


def _summary(manifest: dict, out: str) -> str:
    c = manifest["counts"]
    dropped = c["empty_documents_dropped"]
    lines = [
        f"corpus store: {out}",
        f"documents:    {c['train_documents']:,} train, {c['test_documents']:,} test "
        f"({c['documents_read']:,} read; empty after filtering: {dropped['train']:,} train, "
        f"{dropped['test']:,} test dropped)",
        f"vocabulary:   {c['vocabulary']:,} words",
        f"tokens:       {c['train_tokens']:,} train, {c['test_observed_tokens']:,} test observed, "
        f"{c['test_heldout_tokens']:,} test held out",
    ]
    split = manifest["split"]
    if split["protocol"] == "imported":
        lines.append(f"split:        imported ({split['observed']} / {split['heldout']})")
    elif split["protocol"] == "forecast":
        lines.append(f"split:        forecast: the test documents are the last time slice's; "
                     f"seed {split['seed']}, held-out fraction {split['heldout_fraction']}")
    else:
        lines.append(f"split:        seed {split['seed']}, test docs {split['test_docs']}, "
                     f"held-out fraction {split['heldout_fraction']}")
    if split.get("heldout_train_fraction") is not None:
        lines.append(f"protocol B:   {c.get('train_heldout_tokens', 0):,} training tokens held out "
                     f"(fraction {split['heldout_train_fraction']} of each training document)")
    if "features" in manifest:
        f = manifest["features"]
        lines.append(f"features:     {len(f['names'])} ({', '.join(f['names'][:8])}"
                     f"{', ...' if len(f['names']) > 8 else ''}); filled-in missing values "
                     f"{f['train']['missing_values'] + f['test']['missing_values']}, unseen "
                     f"test categories {f['test']['unseen_categories']}")
    if "time" in manifest:
        t = manifest["time"]
        shown = ", ".join(f"{label} {n}" for label, n in zip(t["labels"][:6],
                                                             t["train_documents"]))
        lines.append(f"time slices:  {len(t['labels'])} of '{t['field']}' by {t['rule']} "
                     f"(training documents: {shown}{', ...' if len(t['labels']) > 6 else ''})")
    if "snippets" in manifest:
        lines.append(f"snippets:     the first {manifest['snippets']['characters']:,} "
                     f"characters of each training document's text")
    if c["undecodable_skipped"]:
        lines.append(f"skipped:      {c['undecodable_skipped']:,} undecodable lines/files")
    return "\n".join(lines)


def verify_command(verify: str | None, inputs: tuple, out: str | None) -> str:
    """``prepare --verify STORE``: the summary line of a verified store."""
    if verify is None:
        raise UsageError("--out is required: the folder of the corpus store to create (or "
                         "--verify STORE to check one)")
    if inputs or out is not None:
        raise UsageError("--verify STORE checks an existing store: give no INPUTS and no --out")
    done = verify_store(verify)
    return (f"{done['store']}: verified: {done['arrays']} arrays ({done['bytes'] / 1e6:,.1f} MB) "
            f"match their sha256, {done['vocabulary']:,} words match the vocabulary hash, the "
            f"manifest's counts match ({done['seconds']:.2f} s)")


def stopword_listing(stopwords: str | None, inputs: tuple, out: str | None) -> str:
    """``prepare --list-stopwords``: the stop words ``--stopwords`` gives text, one a line."""
    if inputs or out is not None:
        raise UsageError("--list-stopwords prints the stop-word list only: give no INPUTS and "
                         "no --out")
    return "\n".join(sorted(stopword_words(stopwords, default_on=True)))


@click.command()
@click.argument("inputs", nargs=-1)
@click.option("--out", "-o", type=click.Path(path_type=str),
              help="Directory of the corpus store to create (required unless --verify).")
@click.option("--verify", "verify", type=click.Path(file_okay=False, path_type=str),
              default=None, metavar="STORE",
              help="Check an existing store instead: every array against the sha256 in its "
                   "manifest, the vocabulary and the counts (reads the whole store).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True,
              help="text: one document per line; dir: one per .txt file; jsonl: a 'text' field "
                   "plus metadata; csv, tsv: a text column plus metadata columns; uci: docword "
                   "file; ldac: LDA-C; mm: Matrix Market (default: from the file names).")
@click.option("--vocab", "vocab", type=click.Path(dir_okay=False, path_type=str),
              help="Vocabulary of UCI, LDA-C or Matrix Market input, one word per line "
                   "(default: vocab.NAME.txt beside docword.NAME.txt; NAME.vocab, STEM.vocab, "
                   "STEM.tokens or vocab.txt beside the others).")
@table_options
@click.option("--min-length", type=int, default=3, show_default=True,
              help="Shortest token kept (characters).")
@click.option("--token-pattern", default=None, metavar="REGEX",
              help="Tokens are the matches of this Python regular expression (no capturing "
                   "group, never empty), e.g. '[^\\W_]+' for letters and digits (default: runs "
                   "of letters).")
@click.option("--case", type=click.Choice(CASES), default="fold", show_default=True,
              help="fold: lower-case every token; keep: keep the case of the text.")
@click.option("--lemmatize", default=None, metavar="LANG",
              help="Replace each token by its lemma in language LANG (en, de, fr, ...), by "
                   "simplemma: pip install \"topictk[lemma]\".")
@click.option("--stopwords", default=None,
              help="english, none, FILE (its words replace the English list) or english+FILE "
                   "(the English list plus the file's words); default: english for text, "
                   "none for UCI.")
@click.option("--list-stopwords", is_flag=True,
              help="Print the stop words --stopwords gives (the English list by default), one "
                   "a line, and exit.")
@click.option("--phrases", is_flag=True,
              help="Join collocations learned on the training documents into one token "
                   "(new_york, new_york_times).")
@click.option("--phrase-min-count", type=int, default=20, show_default=True, metavar="N",
              help="--phrases: a phrase occurs at least N times in the training documents.")
@click.option("--phrase-threshold", type=float, default=0.5, show_default=True,
              metavar="NPMI",
              help="--phrases: a phrase's normalised PMI is at least this (-1 to 1).")
@click.option("--min-df", type=float, default=1, show_default=True,
              help="Keep words in at least this many training documents (or this share, if < 1).")
@click.option("--max-df", type=float, default=1.0, show_default=True,
              help="Keep words in at most this share of training documents "
                   "(or this count, if > 1).")
@click.option("--vocab-size", type=int, default=None, help="Keep the most frequent words only.")
@click.option("--test-docs", type=float, default=None, show_default=str(DEFAULT_TEST_DOCS),
              help="Test documents: a share (< 1) or a count.")
@click.option("--heldout-fraction", type=float, default=None,
              show_default=str(DEFAULT_HELDOUT_FRACTION),
              help="Share of each test document's tokens held out for scoring.")
@click.option("--heldout-train-fraction", type=float, default=None,
              help="Protocol B: also hold out this share of every training document's tokens "
                   "(scored by 'evaluate' with each document's training state).")
@click.option("--seed", type=int, default=0, show_default=True, help="Split seed.")
@click.option("--test-observed", type=click.Path(dir_okay=False, path_type=str),
              help="UCI docword of the test documents' observed parts (imports a published split).")
@click.option("--test-heldout", type=click.Path(dir_okay=False, path_type=str),
              help="UCI docword of the test documents' held-out parts.")
@click.option("--duplicate-ids", type=click.Choice(DUPLICATE_IDS), default="refuse",
              show_default=True,
              help="A document id given twice (an --id-column, a JSONL id): stop, or rename "
                   "the repeats ID~2, ID~3, ... in input order.")
@click.option("--encoding-errors", type=click.Choice(["strict", "skip"]), default="strict",
              show_default=True, help="On undecodable or binary input: stop, or count and skip.")
@click.option("--split-field", default=None, metavar="FIELD",
              help="JSONL field whose value, train or test, fixes which documents are test "
                   "documents (instead of --test-docs).")
@click.option("--vocab-list", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="A fixed vocabulary, one word per line; other words are dropped as the "
                   "input is read.")
@click.option("--meta", multiple=True, metavar="FIELDS",
              help="Metadata fields (JSONL fields, CSV/TSV columns) kept as document features, "
                   "e.g. year,party:cat "
                   "(numeric standardised, categorical one-hot; :num/:cat force the type; "
                   "FIELD:slice: one-hot of --time-column FIELD's time slice); "
                   "may be repeated.")
@meta_file_option("Tab-separated metadata with a header row, row i for input document i.")
@click.option("--time-column", default=None, metavar="FIELD",
              help="Metadata field (JSONL field, CSV/TSV or --meta-file column) holding each "
                   "document's time, a number or an ISO date: the store records each "
                   "document's time slice, and test documents are drawn slice by slice.")
@click.option("--time-bins", default=None, metavar="RULE",
              help="How --time-column's times make slices: year (default), month, width:N "
                   "(N equal-width slices) or edges:E0,E1,...,EN (N slices [E0, E1), ...).")
@click.option("--forecast", is_flag=True,
              help="With --time-column: the test documents are every document of the last "
                   "time slice and only those, so a run trained on the slices before it is "
                   "scored on the slice after (the forecast protocol).")
@click.option("--snippets", type=int, default=0, show_default=True, metavar="N",
              help="Keep the first N characters of each training document's text (white "
                   "space collapsed) for the representative documents of 'topics --docs' "
                   "and the report; 0 keeps no text. Text input only.")
@click.option("--force", is_flag=True,
              help="Replace an existing corpus store (nothing else is ever replaced).")
def prepare(inputs, out, verify, fmt, vocab, text_columns, id_column, delimiter, min_length,
            token_pattern, case, lemmatize, stopwords, list_stopwords, phrases,
            phrase_min_count, phrase_threshold, min_df, max_df, vocab_size, test_docs,
            heldout_fraction, heldout_train_fraction, seed, test_observed, test_heldout,
            duplicate_ids, encoding_errors, split_field, vocab_list, meta, meta_file, time_column,
            time_bins, forecast, snippets, force):
    """Turn text or bag-of-words INPUTS into a corpus store with a fixed held-out split.

    INPUTS are files with one document per line, a folder of .txt files, a .jsonl file,
    .csv/.tsv files, a UCI docword.NAME.txt[.gz], LDA-C (.lda-c, .ldac) or Matrix Market (.mm)
    file, or - for standard input.
    """
    if list_stopwords:
        click.echo(stopword_listing(stopwords, inputs, out))
        return
    if verify is not None or out is None:
        click.echo(verify_command(verify, inputs, out))
        return
    meta = ",".join(meta) if meta else None
    meta_file = single(meta_file, "--meta-file")
    opts = PrepareOptions(format=fmt, vocab=vocab, min_length=min_length, stopwords=stopwords,
                          min_df=min_df, max_df=max_df, vocab_size=vocab_size,
                          test_docs=test_docs, heldout_fraction=heldout_fraction,
                          heldout_train_fraction=heldout_train_fraction, seed=seed,
                          test_observed=test_observed, test_heldout=test_heldout,
                          encoding_errors=encoding_errors, duplicate_ids=duplicate_ids,
                          split_field=split_field,
                          vocab_list=vocab_list, meta=meta, meta_file=meta_file, force=force,
                          time_column=time_column, time_bins=time_bins, forecast=forecast,
                          snippets=snippets, token_pattern=token_pattern, case=case,
                          lemmatize=lemmatize, phrases=phrases,
                          phrase_min_count=phrase_min_count, phrase_threshold=phrase_threshold,
                          table=table_from(text_columns, id_column, delimiter))
    check_store_output(out)
    manifest = prepare_corpus(list(inputs), out, opts)
    click.echo(_summary(manifest, out))
