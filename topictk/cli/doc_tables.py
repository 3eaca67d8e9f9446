"""``python -m topictk.cli.doc_tables [--write] [--doc PAGE]``: check, or with ``--write``
rewrite, the generated key tables of docs/train.md (:mod:`topictk.config.doc_tables`)
against the option declarations of this version and its registered algorithms.

Exit status 0 when every table is current (or was rewritten), 1 when one is stale."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from topictk.config.doc_tables import COMMAND, rewrite, stale_tables
from topictk.inference.registry import CATALOGUE

TRAIN_MD = Path(__file__).resolve().parents[2] / "docs" / "train.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true",
                        help="rewrite the generated tables of the page in place")
    parser.add_argument("--doc", type=Path, default=TRAIN_MD,
                        help="the page holding the tables (default: docs/train.md)")
    args = parser.parse_args(argv)
    text = args.doc.read_text(encoding="utf-8")
    if args.write:
        new = rewrite(text, CATALOGUE)
        if new != text:
            args.doc.write_text(new, encoding="utf-8")
        print(f"{args.doc}: generated tables written")
        return 0
    stale = stale_tables(text, CATALOGUE)
    if stale:
        print(f"{args.doc}: generated tables {', '.join(stale)} differ from the declarations; "
              f"run {COMMAND} --write", file=sys.stderr)
        return 1
    print(f"{args.doc}: generated tables are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
