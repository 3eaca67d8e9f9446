"""``topictk export``."""
from __future__ import annotations

import logging
import sys

import click

from topictk._fileio import atomic_write_bytes
from topictk.cli.options import STDOUT, quiet_option, run_dir_argument, threads_option
from topictk.errors import UsageError
from topictk.evaluation.export import EXPORTS, FoldIn
from topictk.evaluation.infer import check_sweeps
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.topic_listing import export_labels
from topictk.rundir.guard import check_output_file

log = logging.getLogger("topictk")


@click.command()
@run_dir_argument
@click.option("--what", "what", type=click.Choice(list(EXPORTS)), required=True,
              help="doc-topics: theta of the store's documents with their ids and split; "
                   "topic-words: phi with the vocabulary; ldavis: the JSON that LDAvis and "
                   "pyLDAvis read (topics in the model's order); intrusion: word-intrusion "
                   "tasks for human judges, the answer key to --key.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "json", "npz"]), default=None,
              help="Output format [default: tsv; ldavis: json]; npz is binary: give --out "
                   "or redirect.")
@click.option("--out", "-o", "out", type=click.Path(), default=None,
              help="Write this file (atomically) instead of standard output; never an input, "
                   "a file in a run or corpus store, or anything but a regular file.")
@click.option("--force", is_flag=True,
              help="Replace the --out (--key, --html) file if it exists.")
@click.option("--key", "key", type=click.Path(), default=None, metavar="FILE",
              help="intrusion (required): write the answer key (which word is the intruder, "
                   "from which topic) to FILE, in --format, apart from the tasks judges see.")
@click.option("--html", "html_out", type=click.Path(), default=None, metavar="FILE",
              help="ldavis: also write an offline pyLDAvis page to FILE (needs pyLDAvis "
                   "installed; its d3 and LDAvis scripts are copied into the page).")
@click.option("--checkpoint", type=click.IntRange(min=0), default=None, metavar="STEP",
              help="Export this checkpoint instead of the final model.")
@click.option("--labels", "labels_file", type=click.Path(dir_okay=False), default=None,
              help="Topic labels from this file (topic<TAB>label lines) instead of the run's "
                   "labels.tsv; they name the topic columns (topic_3:LABEL) and fields.")
@click.option("--sweeps", type=click.IntRange(min=1), default=50, show_default=True,
              help="doc-topics: fold-in sweeps per document, as for 'topictk infer'.")
@click.option("--burn-in", type=click.IntRange(min=0), default=25, show_default=True,
              help="doc-topics: fold-in sweeps discarded.")
@click.option("--seed", type=int, default=None,
              help="doc-topics: seed of the fold-in; intrusion: seed of the intruders and "
                   "word order (default: the run's training.seed).")
@threads_option("Threads for the fold-in; the result does not depend on it.")
@quiet_option
def export(run_dir, what, fmt, out, force, key, html_out, checkpoint, labels_file, sweeps,
           burn_in, seed, threads, quiet):
    """A run's topic proportions (theta) or topics (phi) as TSV, JSON or NumPy npz; its LDAvis
    data (and an offline pyLDAvis page); word-intrusion tasks for human judges."""
    check_sweeps(sweeps, burn_in)
    kind = EXPORTS[what]
    fmt = fmt or kind.formats[0]
    if fmt not in kind.formats:
        raise UsageError(f"--what {what} is written as {', '.join(kind.formats)}; got "
                         f"--format {fmt}")
    out_path = check_output_file(out, force=force, inputs=[run_dir])
    key_path, html_path = check_side_outputs(what, kind, key, html_out, out_path, force,
                                             run_dir)
    if fmt == "npz" and out_path is None and sys.stdout.isatty():
        raise UsageError("--format npz is binary; give --out FILE.npz or redirect the output")
    run = LoadedRun(run_dir, checkpoint)
    result = kind.build(run, FoldIn(sweeps=sweeps, burn_in=burn_in, seed=seed, threads=threads))
    result = export_labels(result, run, labels_file)
    data = result.to_bytes(fmt)
    if key_path is not None:            # the key first: tasks without their key are useless
        answers = result.key_bytes(fmt)
        atomic_write_bytes(key_path, lambda f: f.write(answers))
    if out_path is None:
        _write_stdout(data, binary=fmt == "npz")
    else:
        atomic_write_bytes(out_path, lambda f: f.write(data))
    if html_path is not None:
        write_ldavis_page(html_path, result.data, run)


def check_side_outputs(what, kind, key, html_out, out_path, force, run_dir):
    """The --key and --html files, checked as --out is and against it, before any work."""
    if kind.key and key is None:
        raise UsageError(f"--what {what} needs --key FILE: the answer key, written apart from "
                         f"the tasks so that judges never see it")
    if key is not None and not kind.key:
        raise UsageError(f"--key writes the answer key of --what intrusion; leave it out for "
                         f"--what {what}")
    if html_out is not None and what != "ldavis":
        raise UsageError(f"--html writes the pyLDAvis page of --what ldavis; leave it out for "
                         f"--what {what}")
    paths = []
    for option, given in (("--key", key), ("--html", html_out)):
        path = check_output_file(given, force=force, inputs=[run_dir])
        if path is not None and any(path.resolve() == p.resolve()
                                    for p in (out_path, *paths) if p is not None):
            raise UsageError(f"{option} {given}: the same file as another output; give each "
                             f"output its own file")
        paths.append(path)
    return paths[0], paths[1]


def write_ldavis_page(path, data: dict, run: LoadedRun) -> None:
    """The offline pyLDAvis page of ``data``; without pyLDAvis, one line saying how to get it
    (the JSON is written all the same)."""
    from topictk.evaluation.ldavis_page import INSTALL, PyLDAvisMissing, ldavis_page

    title = (f"{run.run_dir.name}: {run.config.inference.algorithm}, "
             f"K = {run.config.model.topics} (LDAvis)")
    try:
        page = ldavis_page(data, title)
    except PyLDAvisMissing as exc:
        log.warning("--html %s not written: %s; '%s' and export again for the page (the "
                    "LDAvis JSON is written)", path, exc, INSTALL)
        return
    atomic_write_bytes(path, lambda f: f.write(page.encode("utf-8")))


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
