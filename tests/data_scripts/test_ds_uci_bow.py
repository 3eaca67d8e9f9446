"""Tests of data_scripts/uci_bow.py against a local HTTP server."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from .conftest import FileServer, load_script, run_in_process, run_subprocess, shared_data

ub = load_script("uci_bow")

DOCWORD = "2\n3\n4\n1 1 2\n1 3 1\n2 2 1\n2 3 5\n"
VOCAB = "alpha\nbeta\ngamma\n"


def serve(server: FileServer, name: str, docword: bytes, vocab: bytes) -> str:
    server.files[f"/bow/docword.{name}.txt.gz"] = docword
    server.files[f"/bow/vocab.{name}.txt"] = vocab
    return server.url("/bow/")


def test_fetch_corpus_without_checksum(
    http_server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = serve(http_server, "nips", gzip.compress(DOCWORD.encode()), VOCAB.encode())
    res = run_in_process(
        ub, ["nips", "--cache", str(tmp_path), "--base-url", base, "--quiet"], capsys
    )
    assert res.code == 0, res.err
    docword, vocab = tmp_path / "docword.nips.txt.gz", tmp_path / "vocab.nips.txt"
    assert res.out == f"{docword}\n{vocab}\n"
    assert gzip.decompress(docword.read_bytes()).decode() == DOCWORD
    assert vocab.read_text() == VOCAB
    assert [path for path, _ in http_server.requests] == [
        "/bow/docword.nips.txt.gz",
        "/bow/vocab.nips.txt",
    ]


def test_kos_checksum_mismatch_deletes_docword(
    http_server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = serve(http_server, "kos", gzip.compress(DOCWORD.encode()), VOCAB.encode())
    res = run_in_process(
        ub, ["kos", "--cache", str(tmp_path), "--base-url", base, "--quiet"], capsys
    )
    assert res.code == 1
    assert "SHA-256 of the uncompressed docword is" in res.err
    assert ub.UNCOMPRESSED_SHA256["kos"] in res.err
    assert res.err.count("\n") == 1 and res.out == ""
    assert not (tmp_path / "docword.kos.txt.gz").exists()


def test_vocabulary_size_must_match_header(
    http_server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = serve(http_server, "enron", gzip.compress(DOCWORD.encode()), b"alpha\nbeta\n")
    res = run_in_process(
        ub, ["enron", "--cache", str(tmp_path), "--base-url", base.rstrip("/"), "--quiet"], capsys
    )
    assert res.code == 1
    assert (
        "vocab.enron.txt: has 2 words, but the header of docword.enron.txt.gz says W = 3" in res.err
    )
    # the pair is dropped from the cache, so the next run downloads it again and succeeds
    assert not (tmp_path / "vocab.enron.txt").exists()
    assert not (tmp_path / "docword.enron.txt.gz").exists()
    serve(http_server, "enron", gzip.compress(DOCWORD.encode()), VOCAB.encode())
    res = run_in_process(
        ub, ["enron", "--cache", str(tmp_path), "--base-url", base.rstrip("/"), "--quiet"], capsys
    )
    assert res.code == 0, res.err


def test_download_failure_is_reported(
    http_server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run_in_process(
        ub,
        ["pubmed", "--cache", str(tmp_path), "--base-url", http_server.url("/nothing/"), "--quiet"],
        capsys,
    )
    assert res.code == 1 and "HTTP error 404" in res.err and "docword.pubmed.txt.gz" in res.err


def test_size_check_when_given(
    http_server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docword = gzip.compress(DOCWORD.encode())
    base = serve(http_server, "nytimes", docword, VOCAB.encode())
    argv = ["nytimes", "--cache", str(tmp_path), "--base-url", base, "--quiet"]
    res = run_in_process(ub, [*argv, "--docword-size", str(len(docword) + 1)], capsys)
    assert (
        res.code == 1
        and f"server reports {len(docword)} bytes, expected {len(docword) + 1}" in res.err
    )
    assert not (tmp_path / "docword.nytimes.txt.gz").exists()
    res = run_in_process(
        ub, [*argv, "--docword-size", str(len(docword)), "--vocab-size", str(len(VOCAB))], capsys
    )
    assert res.code == 0, res.err
    res = run_in_process(ub, ["kos", "nips", "--docword-size", "10"], capsys)
    assert res.code == 2 and "exactly one NAME" in res.err


def test_unknown_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_in_process(ub, ["wikipedia"], capsys)
    assert res.code == 2 and "invalid choice: 'wikipedia'" in res.err and res.err.count("\n") == 1


def test_help_subprocess() -> None:
    res = run_subprocess("uci_bow", ["--help"])
    assert res.code == 0
    assert all(name in res.out for name in ub.CORPORA) and "--base-url" in res.out


@pytest.mark.slow
def test_real_kos_files_pass_the_checksum(
    http_server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = shared_data("uci_kos")
    base = serve(
        http_server,
        "kos",
        (folder / "docword.kos.txt.gz").read_bytes(),
        (folder / "vocab.kos.txt").read_bytes(),
    )
    res = run_in_process(
        ub, ["kos", "--cache", str(tmp_path), "--base-url", base, "--quiet"], capsys
    )
    assert res.code == 0, res.err
    assert ub.read_docword_header(tmp_path / "docword.kos.txt.gz") == (3430, 6906, 353160)
