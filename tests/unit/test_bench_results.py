"""benchmarks/_results.py: each benchmark script replaces only its own section of RESULTS.md."""
from __future__ import annotations

import importlib.util
import multiprocessing
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "_results.py"


@pytest.fixture(scope="module")
def results():
    spec = importlib.util.spec_from_file_location("bench_results", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FILE = """# topictk benchmarks

## A
old a

### Notes (hand-written)
keep me

## B
<!-- b: begin -->
old b
<!-- b: end -->
written by hand after the marker

## C
old c
"""


def test_replace_keeps_every_other_byte(results, tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(FILE)
    results.replace_section(path, "## C", "## C\nnew c\n")
    assert path.read_text() == FILE.replace("old c", "new c")
    results.replace_section(path, "## B", "## B\n<!-- b: begin -->\nnew b\n<!-- b: end -->\n",
                            end_marker="<!-- b: end -->")
    assert "new b\n<!-- b: end -->\nwritten by hand after the marker\n\n## C\nnew c\n" \
        in path.read_text()
    results.replace_section(path, "## A", "## A\nnew a\n", keep="### Notes (hand-written)")
    assert path.read_text().startswith(
        "# topictk benchmarks\n\n## A\nnew a\n\n### Notes (hand-written)\nkeep me\n\n## B\n")
    assert not list(tmp_path.glob("RESULTS.md.tmp*"))


def test_missing_section_or_file_is_appended(results, tmp_path):
    path = tmp_path / "RESULTS.md"
    results.replace_section(path, "## A", "## A\nfirst\n")
    assert path.read_text() == "# topictk benchmarks\n\n## A\nfirst\n"
    results.replace_section(path, "## B", "## B\nsecond\n\n\n")
    assert path.read_text() == "# topictk benchmarks\n\n## A\nfirst\n\n## B\nsecond\n"


def _writer(module_path: str, path: str, heading: str, n: int) -> None:
    spec = importlib.util.spec_from_file_location("bench_results", module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for i in range(n):
        module.replace_section(Path(path), heading, f"{heading}\nvalue {i}\n")


def test_concurrent_writers_keep_both_sections(results, tmp_path):
    """Two scripts rewriting their sections at the same time: neither update is lost."""
    path = tmp_path / "RESULTS.md"
    path.write_text("# topictk benchmarks\n\n## A\nvalue -1\n\n## B\nvalue -1\n")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(_PATH), str(path), h, 200))
             for h in ("## A", "## B")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert path.read_text() == "# topictk benchmarks\n\n## A\nvalue 199\n\n## B\nvalue 199\n"
