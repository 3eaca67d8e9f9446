"""Tests of data_scripts/mat_to_docword.py on small .mat files written with scipy.io.savemat."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from .conftest import load_script, run_in_process, run_subprocess, shared_data

m2d = load_script("mat_to_docword")

VOCAB = ["apple", "banana", "cherry", "date"]
# vocabulary x documents
TRAIN = np.array([[2, 0, 1], [0, 0, 3], [1, 1, 0], [0, 4, 0]], dtype=np.float64)
HELDOUT = np.array([[1, 0], [0, 2], [0, 0], [3, 0]], dtype=np.float64)
TEST = np.array(
    [[0, 0], [1, 0], [0, 0], [1, 0]], dtype=np.float64
)  # second test doc has no tokens here


def cell(strings: list[str]) -> np.ndarray:
    arr = np.empty((len(strings), 1), dtype=object)
    for i, s in enumerate(strings):
        arr[i, 0] = s
    return arr


def write_mat(path: Path, drop: str | None = None, **override: object) -> Path:
    variables: dict[str, object] = {
        "wordsTrain": sp.csc_matrix(TRAIN),
        "wordsHeldout": sp.csc_matrix(HELDOUT),
        "wordsTest": sp.csc_matrix(TEST),
        "vocabulary": cell(VOCAB),
        "labelsTrain": np.array([[3], [1], [2]], dtype=np.uint8),
        "labelsTest": np.array([[2], [1]], dtype=np.uint8),
        "labelsToGroup": cell(["alt.atheism", "comp.graphics", "sci.space"]),
    }
    variables.update(override)
    if drop is not None:
        del variables[drop]
    scipy.io.savemat(str(path), variables)
    return path


def gunzip_text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode("ascii")


def test_conversion_content(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mat = write_mat(tmp_path / "20news_data.mat")
    out = tmp_path / "out"
    res = run_in_process(m2d, [str(mat), str(out)], capsys)
    assert res.code == 0, res.err
    assert res.out == ""
    assert gunzip_text(out / "docword.train.txt.gz") == (
        "3\n4\n6\n1 1 2\n1 3 1\n2 3 1\n2 4 4\n3 1 1\n3 2 3\n"
    )
    assert gunzip_text(out / "docword.test_observed80.txt.gz") == "2\n4\n3\n1 1 1\n1 4 3\n2 2 2\n"
    # D counts every column, including the document with no tokens in this part.
    assert gunzip_text(out / "docword.test_heldout20.txt.gz") == "2\n4\n2\n1 2 1\n1 4 1\n"
    assert gunzip_text(out / "docword.test_full.txt.gz") == "2\n4\n4\n1 1 1\n1 2 1\n1 4 4\n2 2 2\n"
    assert (out / "vocab.txt").read_text() == "apple\nbanana\ncherry\ndate\n"
    assert (out / "labels.train.txt").read_text() == "3\n1\n2\n"
    assert (out / "labels.test.txt").read_text() == "2\n1\n"
    assert (out / "label_names.txt").read_text() == "alt.atheism\ncomp.graphics\nsci.space\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    assert "wrote" in res.err


def test_output_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mat = write_mat(tmp_path / "a.mat")
    run_in_process(m2d, [str(mat), str(tmp_path / "one"), "--quiet"], capsys)
    run_in_process(m2d, [str(mat), str(tmp_path / "two"), "--quiet"], capsys)
    for name in ("docword.train.txt.gz", "docword.test_full.txt.gz"):
        one = (tmp_path / "one" / name).read_bytes()
        assert one == (tmp_path / "two" / name).read_bytes()
        assert one[4:8] == b"\x00\x00\x00\x00"  # gzip MTIME field


def test_labels_are_optional(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mat = tmp_path / "nolabels.mat"
    scipy.io.savemat(
        str(mat),
        {
            "wordsTrain": sp.csc_matrix(TRAIN),
            "wordsHeldout": sp.csc_matrix(HELDOUT),
            "wordsTest": sp.csc_matrix(TEST),
            "vocabulary": cell(VOCAB),
        },
    )
    res = run_in_process(m2d, [str(mat), str(tmp_path / "out"), "--quiet"], capsys)
    assert res.code == 0, res.err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "docword.test_full.txt.gz",
        "docword.test_heldout20.txt.gz",
        "docword.test_observed80.txt.gz",
        "docword.train.txt.gz",
        "vocab.txt",
    ]


@pytest.mark.parametrize("missing", ["wordsTest", "vocabulary"])
def test_missing_variable(tmp_path: Path, missing: str, capsys: pytest.CaptureFixture[str]) -> None:
    mat = write_mat(tmp_path / "partial.mat", drop=missing)
    out = tmp_path / "out"
    res = run_in_process(m2d, [str(mat), str(out)], capsys)
    assert res.code == 1
    assert res.err.startswith(f"mat_to_docword.py: error: {mat}: missing variable '{missing}'")
    assert res.err.count("\n") == 1
    assert not out.exists()


def test_bad_counts_and_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fractional = write_mat(tmp_path / "frac.mat", wordsTrain=sp.csc_matrix(TRAIN * 0.5))
    res = run_in_process(m2d, [str(fractional), str(tmp_path / "o1")], capsys)
    assert (
        res.code == 1
        and "'wordsTrain' holds values that are not non-negative integer counts" in res.err
    )
    assert not (tmp_path / "o1").exists()

    short_vocab = write_mat(tmp_path / "short.mat", vocabulary=cell(VOCAB[:3]))
    res = run_in_process(m2d, [str(short_vocab), str(tmp_path / "o2")], capsys)
    assert res.code == 1 and "wordsTrain has 4 rows but vocabulary has 3 words" in res.err


def test_not_a_mat_file_and_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.mat"
    junk.write_text("this is not a MATLAB file\n" * 10)
    res = run_in_process(m2d, [str(junk), str(tmp_path / "out")], capsys)
    assert res.code == 1 and f"{junk}: not a readable MATLAB .mat file" in res.err
    assert res.err.count("\n") == 1

    res = run_in_process(m2d, [str(tmp_path / "absent.mat"), str(tmp_path / "out")], capsys)
    assert res.code == 2 and "no such file" in res.err
    res = run_in_process(m2d, [str(junk)], capsys)
    assert res.code == 2 and "OUT_DIR" in res.err


def test_output_named_by_a_directory_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mat = write_mat(tmp_path / "20news_data.mat")
    out = tmp_path / "out"
    (out / "vocab.txt").mkdir(parents=True)      # the fifth output's name is taken by a folder
    res = run_in_process(m2d, [str(mat), str(out)], capsys)
    assert res.code == 2
    assert f"{out / 'vocab.txt'}: is a directory; give the output file's name" in res.err
    assert sorted(p.name for p in out.iterdir()) == ["vocab.txt"]     # all or nothing


def test_help_subprocess() -> None:
    res = run_subprocess("mat_to_docword", ["--help"])
    assert res.code == 0 and "OUT_DIR" in res.out


@pytest.mark.slow
def test_real_gan2015_mat_matches_shared_files(tmp_path: Path) -> None:
    folder = shared_data("20news_gan2015")
    mat = folder / "20news_data.mat"
    if not mat.exists():
        pytest.skip(f"{mat} not available")
    res = run_subprocess("mat_to_docword", [str(mat), str(tmp_path), "--quiet"], timeout=600)
    assert res.code == 0, res.err
    for name in (
        "docword.train.txt.gz",
        "docword.test_observed80.txt.gz",
        "docword.test_heldout20.txt.gz",
        "docword.test_full.txt.gz",
    ):
        assert gzip.decompress((tmp_path / name).read_bytes()) == gzip.decompress(
            (folder / name).read_bytes()
        ), name
    for name in ("vocab.txt", "labels.train.txt", "labels.test.txt", "label_names.txt"):
        assert (tmp_path / name).read_bytes() == (folder / name).read_bytes(), name
    header = gzip.decompress((tmp_path / "docword.test_heldout20.txt.gz").read_bytes())[:32].split(
        b"\n"
    )[:3]
    assert header == [b"7502", b"2000", b"76508"]
