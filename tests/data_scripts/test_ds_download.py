"""Tests of data_scripts/download.py against a local HTTP server."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from .conftest import FileServer, load_script, run_in_process, run_subprocess

dl = load_script("download")

CONTENT = bytes(range(256)) * 1024  # 256 KiB
SHA = hashlib.sha256(CONTENT).hexdigest()


def test_good_download_then_cache_hit(http_server: FileServer, tmp_path: Path) -> None:
    http_server.files["/data/corpus.bin"] = CONTENT
    url = http_server.url("/data/corpus.bin")

    path = dl.download(url, tmp_path, sha256=SHA, size=len(CONTENT), progress=False)

    assert path == tmp_path / "corpus.bin"
    assert path.read_bytes() == CONTENT
    assert not (tmp_path / "corpus.bin.part").exists()
    assert http_server.requests == [("/data/corpus.bin", None)]
    # A second call is served from the cache after passing the checks: no new request.
    assert dl.download(url, tmp_path, sha256=SHA.upper(), progress=False) == path
    assert len(http_server.requests) == 1


def test_stale_cached_file_is_downloaded_again(http_server: FileServer, tmp_path: Path) -> None:
    http_server.files["/f.bin"] = CONTENT
    (tmp_path / "f.bin").write_bytes(b"old contents")
    path = dl.download(http_server.url("/f.bin"), tmp_path, sha256=SHA, progress=False)
    assert path.read_bytes() == CONTENT
    assert len(http_server.requests) == 1


def test_truncated_response_keeps_part_and_resumes(http_server: FileServer, tmp_path: Path) -> None:
    http_server.files["/t.bin"] = CONTENT
    http_server.modes["/t.bin"] = "truncate"
    url = http_server.url("/t.bin")

    with pytest.raises(dl.DownloadError) as info:
        dl.download(url, tmp_path, sha256=SHA, progress=False)
    message = str(info.value)
    assert "incomplete download" in message
    assert f"of {len(CONTENT)} bytes" in message
    assert not (tmp_path / "t.bin").exists()
    part = tmp_path / "t.bin.part"
    assert part.read_bytes() == CONTENT[: len(CONTENT) // 2]

    http_server.modes["/t.bin"] = "normal"
    path = dl.download(url, tmp_path, sha256=SHA, progress=False)
    assert path.read_bytes() == CONTENT
    assert http_server.requests[-1] == ("/t.bin", f"bytes={len(CONTENT) // 2}-")


def test_checksum_mismatch_deletes_file(http_server: FileServer, tmp_path: Path) -> None:
    http_server.files["/c.bin"] = CONTENT
    wrong = hashlib.sha256(b"something else").hexdigest()
    with pytest.raises(dl.DownloadError) as info:
        dl.download(http_server.url("/c.bin"), tmp_path, sha256=wrong, progress=False)
    message = str(info.value)
    assert "SHA-256 mismatch" in message and wrong in message and SHA in message
    assert list(tmp_path.iterdir()) == []


def test_size_mismatch_deletes_file(http_server: FileServer, tmp_path: Path) -> None:
    http_server.files["/s.bin"] = CONTENT
    with pytest.raises(
        dl.DownloadError, match=rf"server reports {len(CONTENT)} bytes, expected 1000"
    ):
        dl.download(http_server.url("/s.bin"), tmp_path, size=1000, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_dropped_connection_then_resume_with_range(http_server: FileServer, tmp_path: Path) -> None:
    http_server.files["/big/d.bin"] = CONTENT
    http_server.modes["/big/d.bin"] = "drop-once"
    url = http_server.url("/big/d.bin")

    with pytest.raises(dl.DownloadError) as info:
        dl.download(url, tmp_path, sha256=SHA, size=len(CONTENT), progress=False)
    assert "run again to resume" in str(info.value)
    part = tmp_path / "d.bin.part"
    kept = part.stat().st_size
    assert 0 < kept < len(CONTENT)
    assert part.read_bytes() == CONTENT[:kept]
    assert not (tmp_path / "d.bin").exists()

    path = dl.download(url, tmp_path, sha256=SHA, size=len(CONTENT), progress=False)
    assert path.read_bytes() == CONTENT
    assert not part.exists()
    assert http_server.requests[-1] == ("/big/d.bin", f"bytes={kept}-")


def test_server_ignoring_range_restarts_from_zero(http_server: FileServer, tmp_path: Path) -> None:
    http_server.files["/r.bin"] = CONTENT
    http_server.modes["/r.bin"] = "ignore-range"
    (tmp_path / "r.bin.part").write_bytes(b"garbage!")
    path = dl.download(http_server.url("/r.bin"), tmp_path, sha256=SHA, progress=False)
    assert path.read_bytes() == CONTENT
    assert http_server.requests == [("/r.bin", "bytes=8-")]


def test_complete_part_file_is_finished_after_416(http_server: FileServer, tmp_path: Path) -> None:
    http_server.files["/p.bin"] = CONTENT
    (tmp_path / "p.bin.part").write_bytes(CONTENT)
    path = dl.download(http_server.url("/p.bin"), tmp_path, sha256=SHA, progress=False)
    assert path.read_bytes() == CONTENT
    assert http_server.requests == [("/p.bin", f"bytes={len(CONTENT)}-")]


def test_http_404(http_server: FileServer, tmp_path: Path) -> None:
    with pytest.raises(dl.DownloadError, match="HTTP error 404"):
        dl.download(http_server.url("/missing.bin"), tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_progress_is_reported_on_stderr(
    http_server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http_server.files["/prog.bin"] = CONTENT
    dl.download(http_server.url("/prog.bin"), tmp_path, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "prog.bin" in captured.err


def test_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert dl.default_cache_dir() == tmp_path / "topictk"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert dl.default_cache_dir() == Path.home() / ".cache" / "topictk"


def test_cli_success_and_failure(
    http_server: FileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http_server.files["/cli.bin"] = CONTENT
    url = http_server.url("/cli.bin")
    ok = run_in_process(dl, [url, "--cache", str(tmp_path), "--sha256", SHA, "--quiet"], capsys)
    assert (ok.code, ok.out, ok.err) == (0, f"{tmp_path / 'cli.bin'}\n", "")

    bad = run_in_process(
        dl,
        [
            http_server.url("/cli.bin"),
            "--cache",
            str(tmp_path / "other"),
            "--sha256",
            "0" * 64,
            "--quiet",
        ],
        capsys,
    )
    assert bad.code == 1
    assert bad.out == ""
    assert bad.err.startswith("download.py: error: ") and "SHA-256 mismatch" in bad.err
    assert bad.err.count("\n") == 1
    assert not any((tmp_path / "other").iterdir())


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    res = run_in_process(dl, ["http://127.0.0.1:9/x.bin", "--sha256", "abc"], capsys)
    assert res.code == 2
    assert "--sha256" in res.err and "64 hex digits" in res.err
    assert res.err.count("\n") == 1
    res = run_in_process(dl, [], capsys)
    assert res.code == 2 and "URL" in res.err
    res = run_in_process(dl, ["archive.ics.uci.edu/ml/x.txt", "--quiet"], capsys)
    assert res.code == 2 and res.err == (
        "download.py: error: archive.ics.uci.edu/ml/x.txt: not a URL this script can fetch; "
        "give it with its scheme (https://, http://, ftp://, file://)\n"
    )


def test_cli_help_subprocess() -> None:
    res = run_subprocess("download", ["--help"])
    assert res.code == 0
    assert "--sha256" in res.out and "--cache" in res.out


def test_filename_from_url() -> None:
    assert dl.filename_from_url("https://host/a/b/docword.kos.txt.gz?x=1") == "docword.kos.txt.gz"
    assert dl.filename_from_url("https://host/a/my%20file.txt") == "my file.txt"
    with pytest.raises(dl.DownloadError, match="cannot derive a file name"):
        dl.filename_from_url("https://host/")
