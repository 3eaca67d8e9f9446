"""``topictk labels``."""
from __future__ import annotations

import json

import click

from topictk.cli.options import run_dir_argument
from topictk.evaluation.labels import labels_path, parse_set, read_labels, run_labels, write_labels
from topictk.numbering import topic_number
from topictk.evaluation.run import LoadedRun
from topictk.evaluation.topic_listing import listing
from topictk.evaluation.tsv import tsv_rows


@click.command()
@run_dir_argument
@click.option("--suggest", is_flag=True,
              help="Label every topic that has no label yet (in the file or from its seed "
                   "words) with a suggestion: its most frequent adjacent word pair, then its "
                   "top words.")
@click.option("--set", "sets", multiple=True, metavar="N=LABEL",
              help="Label topic N (numbered from 1); N= removes its label. May be repeated.")
@click.option("--labels", "labels_file", type=click.Path(dir_okay=False), default=None,
              help="The labels file to read and write instead of the run's labels.tsv.")
@click.option("--force", is_flag=True,
              help="Rewrite a labels file topictk did not write (its comments are dropped).")
@click.option("--format", "fmt", type=click.Choice(["text", "tsv", "json"]), default="text",
              show_default=True, help="How the labels are printed.")
def labels(run_dir, suggest, sets, labels_file, force, fmt):
    """Show, suggest or set the labels of a run's topics (its labels.tsv).

    Without --suggest or --set, prints each topic's label and where it comes from (file,
    seed). With them, writes the labels file atomically, then prints the labels.
    """
    run = LoadedRun(run_dir)
    K = int(run.topic_word().shape[0])
    path = labels_path(run.run_dir, labels_file)
    if suggest or sets:
        changes = parse_set(sets, K)        # a bad --set fails before any work
        current = read_labels(path, K) if path.is_file() else {}
        if suggest:
            from topictk.evaluation.topic_docs import run_suggestions

            suggested, _ = run_suggestions(run)
            have = {k for k, label in enumerate(run_labels(run.run_dir, run.config, K,
                                                           labels_file)) if label}
            current.update({k: text for k, text in suggested.items() if k not in have})
        for k, text in changes.items():
            if text:
                current[k] = text
            else:
                current.pop(k, None)
        write_labels(path, current, force=force)
    shown = run_labels(run.run_dir, run.config, K, labels_file if path.is_file() else None)
    listed = listing(run)       # an HDP run: its live topics, largest first
    order = range(K) if listed is None else listed.rows
    click.echo(_render([(k, shown[k]) for k in order], fmt), nl=False)


def _render(shown, fmt: str) -> str:
    rows = [(topic_number(k), label.text if label else "", label.source if label else "")
            for k, label in shown]
    if fmt == "json":
        return json.dumps({"labels": [{"topic": t, "label": text or None,
                                       "source": source or None}
                                      for t, text, source in rows]}) + "\n"
    if fmt == "tsv":
        return tsv_rows([("topic", "label", "source"), *rows])
    return "".join(f"{t:>3}  {text or '-'}" + (f"  ({source})" if source else "") + "\n"
                   for t, text, source in rows)
