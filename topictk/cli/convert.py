"""``topictk convert``."""
from __future__ import annotations

import logging
from pathlib import Path

import click

from topictk.cli.options import quiet_option
from topictk.cli.train import _report
from topictk.evaluation.labels import (LABELS_FILE, format_labels, labels_path, read_labels,
                                       written_by_topictk)
from topictk.training.convert import TARGETS, convert_run


@click.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(file_okay=False, path_type=str))
@click.option("--to", "target", type=click.Choice(TARGETS), default="lda", show_default=True,
              help="The model of the new run: lda, a fixed-K LDA run on RUN's live topics.")
@click.option("--out", type=click.Path(file_okay=False, path_type=str), required=True,
              help="The new run directory (RUN is never changed).")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="model.alpha (default LDA's; auto learns it, starting from RUN's alpha_0 "
                   "pi), inference.iterations (steps to train beyond RUN's; default RUN's "
                   "iterations), or a setting a resumed run may change (repeatable).")
@click.option("--force", is_flag=True, help="Replace an existing run in --out.")
@quiet_option
def convert(run_dir, target, out, overrides, force, quiet):
    """Turn RUN, a run of model.family hdp, into a fixed-K LDA run that starts from RUN's
    live topics, and train it; go on with 'topictk train --config NEWRUN/config.yaml
    --resume'."""
    if quiet:
        logging.getLogger("topictk").setLevel(logging.WARNING)

    def carried_labels(live, n_slots: int) -> dict[str, str]:
        """RUN's labels.tsv, its topics numbered as NEWRUN numbers them."""
        path = labels_path(run_dir)
        if not path.is_file():
            return {}
        found = read_labels(path, n_slots)
        kept = {j: found[int(k)] for j, k in enumerate(live) if int(k) in found}
        return {LABELS_FILE: format_labels(kept)} if kept else {}

    def ours(path: Path) -> bool:
        """A labels file topictk wrote (carried over, or by 'topictk labels')."""
        return path.name == LABELS_FILE and path.parent == Path(out).resolve() and \
            written_by_topictk(path)

    _report(convert_run(run_dir, out, target, list(overrides), force=force, quiet=quiet,
                        extra_files=carried_labels, ours=ours), str(Path(out)))
