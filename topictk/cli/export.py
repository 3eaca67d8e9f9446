"""``topictk export``."""
from __future__ import annotations

import sys

import click

from topictk._fileio import atomic_write_bytes
from topictk.cli.options import STDOUT, quiet_option, run_dir_argument, threads_option
from topictk.errors import UsageError
from topictk.evaluation.export import EXPORTS, FoldIn
from topictk.evaluation.infer import check_sweeps
from topictk.evaluation.run import LoadedRun
from topictk.rundir.guard import check_output_file


@click.command()
@run_dir_argument
@click.option("--what", "what", type=click.Choice(list(EXPORTS)), required=True,
              help="doc-topics: theta of the store's documents with their ids and split; "
                   "topic-words: phi with the vocabulary; ldavis: the JSON that LDAvis and "
                   "pyLDAvis read (topics in the model's order).")
@click.option("--format", "fmt", type=click.Choice(["tsv", "json", "npz"]), default=None,
              help="Output format [default: tsv; ldavis: json]; npz is binary: give --out "
                   "or redirect.")
@click.option("--out", "-o", "out", type=click.Path(), default=None,
              help="Write this file (atomically) instead of standard output; never an input, "
                   "a file in a run or corpus store, or anything but a regular file.")
@click.option("--force", is_flag=True, help="Replace the --out file if it exists.")
@click.option("--checkpoint", type=click.IntRange(min=0), default=None, metavar="STEP",
              help="Export this checkpoint instead of the final model.")
@click.option("--sweeps", type=click.IntRange(min=1), default=50, show_default=True,
              help="doc-topics: fold-in sweeps per document, as for 'topictk infer'.")
@click.option("--burn-in", type=click.IntRange(min=0), default=25, show_default=True,
              help="doc-topics: fold-in sweeps discarded.")
@click.option("--seed", type=int, default=None,
              help="doc-topics: seed of the fold-in (default: the run's training.seed).")
@threads_option("Threads for the fold-in; the result does not depend on it.")
@quiet_option
def export(run_dir, what, fmt, out, force, checkpoint, sweeps, burn_in, seed, threads, quiet):
    """A run's topic proportions (theta) or topics (phi) as TSV, JSON or NumPy npz."""
    check_sweeps(sweeps, burn_in)
    kind = EXPORTS[what]
    fmt = fmt or kind.formats[0]
    if fmt not in kind.formats:
        raise UsageError(f"--what {what} is written as {', '.join(kind.formats)}; got "
                         f"--format {fmt}")
    out_path = check_output_file(out, force=force, inputs=[run_dir])
    if fmt == "npz" and out_path is None and sys.stdout.isatty():
        raise UsageError("--format npz is binary; give --out FILE.npz or redirect the output")
    run = LoadedRun(run_dir, checkpoint)
    result = kind.build(run, FoldIn(sweeps=sweeps, burn_in=burn_in, seed=seed, threads=threads))
    data = result.to_bytes(fmt)
    if out_path is None:
        _write_stdout(data, binary=fmt == "npz")
    else:
        atomic_write_bytes(out_path, lambda f: f.write(data))


def _write_stdout(data: bytes, *, binary: bool) -> None:
    """Text through click (its errors name standard output), bytes to the binary stream."""
    if not binary:
        click.echo(data.decode("utf-8"), nl=False)
        return
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as exc:
        exc.filename = exc.filename or STDOUT
        raise
