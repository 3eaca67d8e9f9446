"""The key tables of docs/train.md are the option declarations: every generated table equals
what ``python -m topictk.cli.doc_tables`` renders from schema.py and the drivers' ``OPTIONS``
and ``traits``, and the renderer follows a changed declaration."""
from __future__ import annotations

import pytest

from topictk.cli import doc_tables as command
from topictk.config import doc_tables
from topictk.config.doc_tables import (
    begin_marker,
    blocks,
    options_table,
    render,
    rewrite,
    stale_tables,
)
from topictk.config.schema import MODEL, TRAINING, Option
from topictk.inference.registry import CATALOGUE, get_driver

TRAIN_MD = command.TRAIN_MD


def _page(*names: str) -> str:
    """A page holding empty generated tables ``names`` between prose."""
    parts = ["# A page\n"]
    for name in names:
        parts += [f"{begin_marker(name)}\n{doc_tables.END}\n", "Prose.\n"]
    return "\n".join(parts)


def test_the_tables_of_train_md_follow_the_declarations():
    stale = stale_tables(TRAIN_MD.read_text(encoding="utf-8"), CATALOGUE)
    assert not stale, (f"docs/train.md: the generated tables {', '.join(stale)} differ from "
                       f"the option declarations; run {doc_tables.COMMAND} --write")


def test_train_md_holds_every_table_once():
    names = [name for name, _, _ in blocks(TRAIN_MD.read_text(encoding="utf-8"))]
    assert sorted(names) == sorted(doc_tables.tables())


def test_a_changed_declaration_changes_its_table(monkeypatch):
    page = rewrite(TRAIN_MD.read_text(encoding="utf-8"), CATALOGUE)
    monkeypatch.setitem(TRAINING, "seed", Option("int", 7, low=0, help="the seed | all"))
    assert "| `seed` | an integer >= 0 | `7` | the seed \\| all |" in render("training",
                                                                         CATALOGUE)
    options = {**get_driver("ovb").OPTIONS, "tau0": Option("float", 17.5, low=0, help="delay")}
    monkeypatch.setattr(get_driver("ovb"), "OPTIONS", options)
    keys = render("algorithm-keys", CATALOGUE)
    assert "| `tau0` | a number >= 0 | `17.5` | delay |" in keys
    assert stale_tables(page, CATALOGUE) == ["training", "algorithm-keys"]


def test_cells_keys_and_defaults():
    table = options_table({"step": {"a": Option("float", 0.5, high=1, help="scale *a*")},
                           "k": Option("int", help="required"),
                           "on": Option("bool", False, help="a <flag>"),
                           "layers": Option("int_list", [2, 3], help="")})
    assert table.splitlines()[2:] == [
        "| `step.a` | a number <= 1 | `0.5` | scale \\*a\\* |",
        "| `k` | an integer | required | required |",
        "| `on` | true or false | `false` | a \\<flag> |",
        "| `layers` | a list of integers | `[2, 3]` |  |"]


def test_a_family_with_keys_of_its_own_has_its_own_table():
    keys = {line.split("`")[1]: line for line in render("model", CATALOGUE).splitlines()
            if line.startswith("| `")}
    assert set(MODEL) == set(keys) and "| `lda` |" in keys["family"]
    dmr = {line.split("`")[1]: line for line in render("model-dmr", CATALOGUE).splitlines()
           if line.startswith("| `")}
    assert set(MODEL) < set(dmr) and "| `dmr` |" in dmr["family"]
    assert "one of store, slice, spline | `store` |" in dmr["features"]


def test_the_traits_table_has_every_algorithm():
    rows = render("algorithms", CATALOGUE).splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == CATALOGUE.algorithm_names()
    gibbs = next(row for row in rows if row.startswith("| `gibbs`"))
    assert "[sampled](family-sampled.md) | yes | yes | yes | yes |" in gibbs


def test_rewrite_touches_only_the_tables():
    page = _page("training", "evaluation")
    new = rewrite(page, CATALOGUE)
    assert new.count("Prose.") == 2 and "| `seed` |" in new and "| `fold_in` |" in new
    assert rewrite(new, CATALOGUE) == new and stale_tables(new, CATALOGUE) == []
    assert stale_tables(page, CATALOGUE) == ["training", "evaluation"]
    with pytest.raises(KeyError, match="no generated table 'nothing'"):
        rewrite(_page("nothing"), CATALOGUE)
    with pytest.raises(ValueError, match="has no"):
        list(blocks(begin_marker("training") + "\n| a |\n"))


def test_the_command_checks_and_writes(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(_page("training"), encoding="utf-8")
    assert command.main(["--doc", str(page)]) == 1
    assert f"training differ from the declarations; run {doc_tables.COMMAND} --write" in (
        capsys.readouterr().err)
    assert command.main(["--doc", str(page), "--write"]) == 0
    assert command.main(["--doc", str(page)]) == 0
    assert "| `keep_checkpoints` |" in page.read_text(encoding="utf-8")
