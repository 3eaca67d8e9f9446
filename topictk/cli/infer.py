"""``topictk infer``."""
from __future__ import annotations

import click

from topictk import progress
from topictk._fileio import atomic_write_bytes
from topictk.cli.options import (
    cluster_options,
    cluster_overrides,
    meta_file_option,
    quiet_option,
    run_dir_argument,
    single,
    table_from,
    table_options,
    threads_option,
)
from topictk.corpus.readers import FORMATS
from topictk.evaluation.infer import (
    check_sweeps,
    infer_run,
    render_jsonl,
    render_tsv,
    topic_labels,
    tsv_header,
)
from topictk.evaluation.topic_listing import listing
from topictk.evaluation.run import LoadedRun, run_on_cluster
from topictk.rundir.guard import check_output_file


@click.command()
@run_dir_argument
@click.argument("inputs", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto",
              show_default=True, help="Input format, as for 'topictk prepare'.")
@click.option("--vocab", type=click.Path(dir_okay=False), default=None,
              help="UCI, LDA-C or Matrix Market input: its vocabulary, as for 'topictk "
                   "prepare'.")
@table_options
@meta_file_option("DMR runs: tab-separated metadata, row i for document i (JSONL fields "
                  "work too).")
@click.option("--out", "-o", "out", type=click.Path(), default=None,
              help="Write this file (atomically) instead of standard output; never an input, "
                   "a file in a run or corpus store, or anything but a regular file.")
@click.option("--force", is_flag=True, help="Replace the --out file if it exists.")
@click.option("--output-format", type=click.Choice(["jsonl", "tsv"]), default="jsonl",
              show_default=True, help="jsonl: one object per document; tsv: a header and one "
                                      "row of proportions per document.")
@click.option("--labels", "labels_file", type=click.Path(dir_okay=False), default=None,
              help="Topic labels from this file (topic<TAB>label lines) instead of the run's "
                   "labels.tsv; they name the topic columns (topic_3:LABEL) and top_labels.")
@click.option("--top", "-n", type=click.IntRange(min=1), default=3, show_default=True,
              help="jsonl: topics listed in 'top_topics', largest first.")
@click.option("--sweeps", type=click.IntRange(min=1), default=50, show_default=True,
              help="Gibbs sweeps per document with the topics fixed.")
@click.option("--burn-in", type=click.IntRange(min=0), default=25, show_default=True,
              help="Sweeps discarded before the counts are averaged.")
@click.option("--seed", type=int, default=None, help="Seed of the fold-in (default: the run's "
                                                     "training.seed).")
@click.option("--checkpoint", type=click.IntRange(min=0), default=None, metavar="STEP",
              help="Use this checkpoint instead of the final model.")
@click.option("--encoding-errors", type=click.Choice(["strict", "skip"]), default="strict",
              show_default=True, help="Undecodable documents: stop, or skip them.")
@threads_option("Threads for the fold-in (default: the run's training.threads); the "
                "result does not depend on it.")
@cluster_options
@quiet_option
def infer(run_dir, inputs, fmt, vocab, text_columns, id_column, delimiter, meta_file, out, force,
          labels_file, output_format, top, sweeps, burn_in, seed, checkpoint, encoding_errors,
          threads, scheduler, dask_workers, quiet):
    """Topic proportions of new documents under a trained run.

    INPUTS are read like 'topictk prepare' input and mapped onto the run's vocabulary; words
    it does not know are dropped and counted. One output record per input document, in input
    order.
    """
    check_sweeps(sweeps, burn_in)
    meta_file = single(meta_file, "--meta-file")
    out_path = check_output_file(out, force=force,
                                 inputs=[run_dir, *inputs, *(p for p in (vocab, meta_file) if p)])
    cluster_overrides(scheduler, dask_workers)      # they exclude each other
    run = LoadedRun(run_dir, checkpoint)
    with run_on_cluster(run, scheduler, dask_workers, "applied to new documents"):
        docs, blocks = infer_run(run, list(inputs), fmt=fmt, meta_file=meta_file, sweeps=sweeps,
                                 burn_in=burn_in, seed=seed, encoding_errors=encoding_errors,
                                 vocab=vocab, threads=threads,
                                 table=table_from(text_columns, id_column, delimiter))

        labels = topic_labels(run, labels_file)
        listed = listing(run)   # an HDP run: its live topics, largest first, by number
        ids = None if listed is None else listed.ids
        if listed is not None and labels:
            labels = [labels[k] for k in listed.rows]

        def texts():
            if output_format == "tsv":
                yield tsv_header(int(run.config.model.topics), labels, ids)
            with progress.bar(docs.n_docs, desc="infer", unit="doc") as shown:
                for start, theta in blocks:     # a block of BLOCK_DOCS documents at a time
                    shown.update(theta.shape[0])
                    if listed is not None:
                        theta = theta[:, listed.rows]
                    yield (render_tsv(docs, start, theta) if output_format == "tsv"
                           else render_jsonl(docs, start, theta, top, labels, ids))

        if out_path is None:
            for text in texts():
                click.echo(text, nl=False)
        else:
            def write(file) -> None:
                for text in texts():
                    file.write(text.encode("utf-8"))

            atomic_write_bytes(out_path, write)
