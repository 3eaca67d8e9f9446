"""Tests of data_scripts/newsgroups_to_jsonl.py on small tarballs built here."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from .conftest import FileServer, load_script, run_in_process, run_subprocess, shared_data

ng = load_script("newsgroups_to_jsonl")

MSG_QUOTES_SIG = (
    "From: alice@example.com (Alice)\n"
    "Subject: Re: Orbits\n"
    "Lines: 9\n"
    "\n"
    "In article <1993Apr5.1234@cs.example.edu> bob@example.edu (Bob) writes:\n"
    "> Is the orbit stable?\n"
    "|> Earlier quote.\n"
    "Carol wrote:\n"
    "Yes, the orbit is stable.\n"
    "-- not a separator\n"
    "-- \n"
    "Alice, Example University\n"
)
MSG_TWO_SEPARATORS = (
    "From: dave@example.com\n"
    "Subject: Caf\xe9 racers\n"
    "\n"
    "Body line one.\n"
    "--\n"
    "Body line after a first dash line.\n"
    "--\n"
    "Dave's signature\n"
)
MSG_PLAIN = "From: erin@example.com\nSubject: Hello\n\nJust text.\n"

# (member name, content) in a deliberately unsorted order.
MESSAGES = [
    ("20news-bydate-test/sci.space/7", MSG_PLAIN),
    ("20news-bydate-train/sci.space/10", MSG_QUOTES_SIG),
    ("20news-bydate-train/rec.motorcycles/5", MSG_TWO_SEPARATORS),
    ("20news-bydate-train/sci.space/9", MSG_PLAIN),
    ("20news-bydate-test/alt.atheism/3", MSG_PLAIN),
]
EXPECTED_IDS = [
    "train/rec.motorcycles/5",
    "train/sci.space/9",
    "train/sci.space/10",
    "test/alt.atheism/3",
    "test/sci.space/7",
]


def make_tarball(path: Path, members: list[tuple[str, str]], extra_dirs: bool = True) -> Path:
    mode = {".gz": "w:gz", ".xz": "w:xz", ".bz2": "w:bz2"}.get(path.suffix, "w")
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        if extra_dirs:
            for name in sorted(
                {m.rsplit("/", 1)[0] for m, _ in members} | {m.split("/", 1)[0] for m, _ in members}
            ):
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
        for name, text in members:
            data = text.encode("latin-1")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def records(text: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def tarball(tmp_path: Path) -> Path:
    return make_tarball(tmp_path / "20news-bydate.tar.gz", MESSAGES)


def test_default_output_fields_order_and_text(
    tarball: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run_in_process(ng, [str(tarball)], capsys)
    assert res.code == 0, res.err
    recs = records(res.out)
    assert [r["id"] for r in recs] == EXPECTED_IDS
    assert list(recs[0]) == ["text", "group", "split", "id"]
    assert [(r["split"], r["group"]) for r in recs] == [
        tuple(i.split("/")[:2]) for i in EXPECTED_IDS
    ]
    by_id = {r["id"]: r["text"] for r in recs}
    assert by_id["train/sci.space/10"] == MSG_QUOTES_SIG
    assert by_id["train/rec.motorcycles/5"] == MSG_TWO_SEPARATORS  # latin-1 \xe9 decoded as "é"
    assert "Caf\u00e9" in by_id["train/rec.motorcycles/5"]
    assert res.out.isascii()
    assert "5 messages (3 train, 2 test)" in res.err


def test_remove_headers(tarball: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = {
        r["id"]: r["text"]
        for r in records(run_in_process(ng, [str(tarball), "--remove-headers"], capsys).out)
    }
    assert recs["test/sci.space/7"] == "Just text.\n"
    assert recs["train/sci.space/10"].startswith("In article <1993Apr5.1234@cs.example.edu>")
    assert all("Subject:" not in t for t in recs.values())


def test_remove_quotes(tarball: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = {
        r["id"]: r["text"]
        for r in records(run_in_process(ng, [str(tarball), "--remove-quotes"], capsys).out)
    }
    text = recs["train/sci.space/10"]
    assert "In article" not in text and "writes:" not in text and "wrote:" not in text
    assert "> Is the orbit" not in text and "|> Earlier" not in text
    assert "Yes, the orbit is stable.\n" in text
    assert "Subject: Re: Orbits\n" in text  # headers are kept without --remove-headers
    assert recs["test/sci.space/7"] == MSG_PLAIN


def test_remove_signatures_uses_last_separator(
    tarball: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run_in_process(ng, [str(tarball), "--remove-signatures"], capsys)
    recs = {r["id"]: r["text"] for r in records(res.out)}
    assert recs["train/rec.motorcycles/5"] == (
        "From: dave@example.com\nSubject: Caf\xe9 racers\n\n"
        "Body line one.\n--\nBody line after a first dash line."
    )
    text = recs["train/sci.space/10"]
    assert text.endswith("-- not a separator")
    assert "Alice, Example University" not in text


def test_all_flags_together(tarball: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(tarball), "--remove-headers", "--remove-quotes", "--remove-signatures"]
    recs = {r["id"]: r["text"] for r in records(run_in_process(ng, argv, capsys).out)}
    assert recs["train/sci.space/10"] == "Yes, the orbit is stable.\n-- not a separator"


@pytest.mark.parametrize("suffix", [".tar", ".tar.xz", ".tar.bz2"])
def test_other_compressions_and_out_file(
    tmp_path: Path, tarball: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    reference = run_in_process(ng, [str(tarball), "--quiet"], capsys)
    other = make_tarball(tmp_path / f"news{suffix}", list(reversed(MESSAGES)), extra_dirs=False)
    out = tmp_path / "out.jsonl"
    res = run_in_process(ng, [str(other), "--out", str(out)], capsys)
    assert res.code == 0 and res.out == ""
    assert out.read_text(encoding="utf-8") == reference.out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["20news-bydate.tar.gz", f"news{suffix}", "out.jsonl"]
    )


@pytest.mark.parametrize("suffix", [".tar.gz", ".tar"])
def test_truncated_archive(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    full = make_tarball(tmp_path / f"full{suffix}", MESSAGES).read_bytes()
    # For the plain tar, cut exactly at a member boundary so tarfile itself would not notice.
    cut = len(full) * 2 // 3 if suffix == ".tar.gz" else 512 * 12
    broken = tmp_path / f"broken{suffix}"
    broken.write_bytes(full[:cut])
    out = tmp_path / "out.jsonl"
    res = run_in_process(ng, [str(broken), "--out", str(out)], capsys)
    assert res.code == 1
    assert res.err.startswith(f"newsgroups_to_jsonl.py: error: {broken}: truncated archive")
    assert res.err.count("\n") == 1
    assert res.out == ""
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.jsonl")]


def test_corrupt_header_in_the_middle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray(make_tarball(tmp_path / "full.tar", MESSAGES).read_bytes())
    data[512 * 10 : 512 * 11] = b"\x7fgarbage" * 64  # the header of the third message
    broken = tmp_path / "broken.tar"
    broken.write_bytes(bytes(data))
    res = run_in_process(ng, [str(broken)], capsys)
    assert res.code == 1
    assert f"{broken}: corrupt archive (invalid tar header at byte {512 * 10})" in res.err
    assert res.out == ""


@pytest.mark.parametrize(
    "bad_member",
    [
        "20news-bydate-train/loose-file",
        "other-top/sci.space/1",
        "20news-bydate-train/sci.space/sub/1",
    ],
)
def test_wrong_layout(tmp_path: Path, bad_member: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_tarball(tmp_path / "bad.tar.gz", [*MESSAGES, (bad_member, MSG_PLAIN)])
    out = tmp_path / "out.jsonl"
    res = run_in_process(ng, [str(path), "--out", str(out)], capsys)
    assert res.code == 1
    assert f"{path}: unexpected archive member '{bad_member}'" in res.err
    assert "expected 20news-bydate-train/<group>/<msgid>" in res.err
    assert not out.exists()


def test_missing_split_and_hidden_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only_train = [(n, t) for n, t in MESSAGES if n.startswith("20news-bydate-train/")]
    path = make_tarball(
        tmp_path / "train-only.tar", [*only_train, ("20news-bydate-train/.DS_Store", "x")]
    )
    res = run_in_process(ng, [str(path)], capsys)
    assert res.code == 1
    assert "no messages under 20news-bydate-test/" in res.err
    assert res.out == ""


def test_not_a_tarball(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.tar.gz"
    path.write_text("just some text, not an archive\n" * 50)
    res = run_in_process(ng, [str(path)], capsys)
    assert res.code == 1
    assert f"{path}: " in res.err and res.err.count("\n") == 1


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = run_in_process(ng, [str(tmp_path / "nope.tar.gz")], capsys)
    assert missing.code == 2 and f"{tmp_path / 'nope.tar.gz'}: no such file" in missing.err
    neither = run_in_process(ng, [], capsys)
    assert neither.code == 2 and "either TARBALL or --url" in neither.err
    no_sha = run_in_process(ng, ["--url", "http://127.0.0.1:9/x.tar.gz"], capsys)
    assert no_sha.code == 2 and "--url requires --sha256" in no_sha.err


def test_url_download_with_checksum(
    http_server: FileServer, tarball: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tarball.read_bytes()
    http_server.files["/20news-bydate.tar.gz"] = data
    url = http_server.url("/20news-bydate.tar.gz")
    cache = tmp_path / "cache"
    sha = hashlib.sha256(data).hexdigest()
    res = run_in_process(
        ng, ["--url", url, "--sha256", sha, "--cache", str(cache), "--quiet"], capsys
    )
    assert res.code == 0, res.err
    assert [r["id"] for r in records(res.out)] == EXPECTED_IDS
    assert (cache / "20news-bydate.tar.gz").read_bytes() == data

    bad = run_in_process(
        ng, ["--url", url, "--sha256", "f" * 64, "--cache", str(tmp_path / "c2"), "--quiet"], capsys
    )
    assert bad.code == 1 and "SHA-256 mismatch" in bad.err and bad.out == ""


def test_help_subprocess() -> None:
    res = run_subprocess("newsgroups_to_jsonl", ["--help"])
    assert res.code == 0
    for flag in (
        "--remove-headers",
        "--remove-quotes",
        "--remove-signatures",
        "--url",
        "--sha256",
        "--out",
    ):
        assert flag in res.out


@pytest.mark.slow
def test_real_bydate_tarball(tmp_path: Path) -> None:
    archive = shared_data("20news_bydate_raw", "20news-bydate.tar.xz")
    out = tmp_path / "20news.jsonl"
    res = run_subprocess("newsgroups_to_jsonl", [str(archive), "--out", str(out)], timeout=600)
    assert res.code == 0, res.err
    splits: Counter[str] = Counter()
    groups: Counter[tuple[str, str]] = Counter()
    previous: tuple[int, str, int] | None = None
    with open(out, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            splits[rec["split"]] += 1
            groups[rec["split"], rec["group"]] += 1
            key = (
                0 if rec["split"] == "train" else 1,
                rec["group"],
                int(rec["id"].rsplit("/", 1)[1]),
            )
            assert previous is None or previous < key
            previous = key
    assert splits == {"train": 11314, "test": 7532}
    assert len({g for _, g in groups}) == 20
    assert groups["train", "alt.atheism"] == 480 and groups["test", "talk.religion.misc"] == 251
