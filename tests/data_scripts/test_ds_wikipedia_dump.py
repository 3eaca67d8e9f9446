"""Tests of data_scripts/wikipedia_dump.py on a small MediaWiki export written here."""

from __future__ import annotations

import bz2
from pathlib import Path

import pytest

from .conftest import load_script, run_in_process, run_subprocess

wd = load_script("wikipedia_dump")

NS = "http://www.mediawiki.org/xml/export-0.10/"


def page(title: str, ns: int, text: str, redirect: str | None = None) -> str:
    redirect_el = f'<redirect title="{redirect}" />' if redirect else ""
    return (
        f"  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>1</id>\n"
        f"    {redirect_el}\n"
        f'    <revision><id>2</id><text bytes="1" xml:space="preserve">{text}</text>'
        "</revision>\n  </page>\n"
    )


ANARCHISM = (
    "{{Infobox ideology|name={{lang|en|Anarchism}}|image=x.png}}\n"
    "'''Anarchism''' is a [[political philosophy]] and [[Social movement|movement]] "
    "that is sceptical of [[authority]]."
    '&lt;ref name="sep"&gt;{{cite web|title=Anarchism}} Some source&lt;/ref&gt; '
    "See [https://example.org/anarchism the overview] and [https://example.org/bare]."
    '&lt;ref name="b" /&gt;\n'
    "&lt;!-- editors: do not change --&gt;\n"
    "== History ==\n"
    "[[File:Flag.svg|thumb|A flag with a [[Black flag|black]] field]]\n"
    '{| class="wikitable"\n|-\n! Year !! Event\n|-\n| 1840 || {{nowrap|What is property?}}\n|}\n'
    "The term was used ''positively'' by Proudhon &amp;amp; others.&lt;br /&gt;"
    "&lt;small&gt;Small&lt;/small&gt; print.\n"
    "* First item\n"
    "[[Category:Political ideologies]]\n[[Image:Other.png]]"
)
ANARCHISM_TEXT = (
    "Anarchism is a political philosophy and movement that is sceptical of authority. "
    "See the overview and . History The term was used positively by Proudhon & others. "
    "Small print. First item"
)
ALBEDO = (
    "'''Albedo''' is the\tfraction of [[sunlight]]\n\n"
    "that is [[Diffuse reflection|diffusely reflected]]."
)
ALBEDO_TEXT = "Albedo is the fraction of sunlight that is diffusely reflected."

PAGES = [
    page("Anarchism", 0, ANARCHISM),
    page(
        "AccessibleComputing",
        0,
        "#REDIRECT [[Computer accessibility]]",
        redirect="Computer accessibility",
    ),
    page("Talk:Anarchism", 1, "Talk page text that must not appear."),
    page("Albedo", 0, ALBEDO),
    page("OldRedirect", 0, "#redirect [[Albedo]]"),
    page("A", 0, "A is a [[letter]]."),
]


def dump_xml(pages: list[str]) -> str:
    return (
        f'<mediawiki xmlns="{NS}" version="0.10" xml:lang="en">\n'
        "  <siteinfo><sitename>Wikipedia</sitename><namespaces>"
        '<namespace key="0" case="first-letter" />'
        '<namespace key="1" case="first-letter">Talk</namespace>'
        "</namespaces></siteinfo>\n" + "".join(pages) + "</mediawiki>\n"
    )


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    path = tmp_path / "enwiki-pages-articles.xml.bz2"
    path.write_bytes(bz2.compress(dump_xml(PAGES).encode("utf-8")))
    return path


def test_markup_stripping_and_page_filtering(
    dump: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run_in_process(wd, [str(dump)], capsys)
    assert res.code == 0, res.err
    assert res.out.splitlines() == [ANARCHISM_TEXT, ALBEDO_TEXT, "A is a letter."]
    assert "Talk page" not in res.out and "Computer accessibility" not in res.out
    assert "3 articles" in res.err


def test_titles_max_and_min_words(dump: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = run_in_process(wd, [str(dump), "--titles", "--min-words", "5", "--quiet"], capsys)
    assert res.out.splitlines() == [f"Anarchism\t{ANARCHISM_TEXT}", f"Albedo\t{ALBEDO_TEXT}"]
    assert res.err == ""
    res = run_in_process(wd, [str(dump), "--titles", "--max-articles", "1", "--quiet"], capsys)
    assert res.out == f"Anarchism\t{ANARCHISM_TEXT}\n"


def test_plain_xml_and_out_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "dump.xml"
    src.write_text(dump_xml(PAGES), encoding="utf-8")
    out = tmp_path / "articles.txt"
    res = run_in_process(wd, [str(src), "--out", str(out)], capsys)
    assert res.code == 0 and res.out == ""
    assert out.read_text(encoding="utf-8").splitlines() == [
        ANARCHISM_TEXT,
        ALBEDO_TEXT,
        "A is a letter.",
    ]


@pytest.mark.parametrize(
    ("wikitext", "expected"),
    [
        ("a {{outer|{{inner|x}}|y}} b", "a b"),
        ("unclosed {{template here", "unclosed template here"),
        ("[[target]]s and [[target#Section|shown]]", "targets and shown"),
        ("[[Category:X]][[category:y|z]]keep", "keep"),
        ("== Heading ==\n=== Sub ===\ntext", "Heading Sub text"),
        ("x<ref>note</ref>y<ref name=a/>z", "xyz"),
        ("x&lt;b&gt;", "x<b>"),
    ],
)
def test_wikitext_to_text(wikitext: str, expected: str) -> None:
    assert wd.wikitext_to_text(wikitext) == expected


def test_truncated_dump_keeps_streamed_articles(
    dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    xml = dump_xml(PAGES).encode("utf-8")
    cut = xml.index(b"<title>Albedo</title>") + 40  # inside the page after two articles
    truncated_xml = tmp_path / "truncated.xml"
    truncated_xml.write_bytes(xml[:cut])
    res = run_in_process(wd, [str(truncated_xml)], capsys)
    assert res.code == 1
    assert res.out.splitlines() == [ANARCHISM_TEXT]  # written before the error stays written
    assert res.err.startswith(
        f"wikipedia_dump.py: error: {truncated_xml}: truncated or malformed XML"
    )
    assert res.err.count("\n") == 1

    truncated_bz2 = tmp_path / "truncated.xml.bz2"
    truncated_bz2.write_bytes(dump.read_bytes()[: len(dump.read_bytes()) // 2])
    out = tmp_path / "articles.txt"
    res = run_in_process(wd, [str(truncated_bz2), "--out", str(out)], capsys)
    assert res.code == 1
    assert f"{truncated_bz2}: truncated" in res.err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".articles")]


def test_not_mediawiki(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "page.xml"
    html.write_text("<html><body><p>hello</p></body></html>\n")
    res = run_in_process(wd, [str(html)], capsys)
    assert res.code == 1
    assert f"{html}: not a MediaWiki XML export (root element is <html>" in res.err
    text = tmp_path / "text.xml.bz2"
    text.write_bytes(bz2.compress(b"plain words, no markup at all\n"))
    res = run_in_process(wd, [str(text)], capsys)
    assert res.code == 1 and f"{text}: not a MediaWiki XML export" in res.err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = run_in_process(wd, [str(tmp_path / "absent.xml.bz2")], capsys)
    assert res.code == 2 and "no such file" in res.err
    res = run_in_process(wd, [str(tmp_path / "absent.xml.bz2"), "--min-words", "-3"], capsys)
    assert res.code == 2 and "non-negative integer" in res.err and res.err.count("\n") == 1


def test_help_and_stdout_subprocess(dump: Path) -> None:
    assert run_subprocess("wikipedia_dump", ["--help"]).out.count("--max-articles") >= 1
    res = run_subprocess("wikipedia_dump", [str(dump), "--quiet", "--max-articles", "2"])
    assert res.code == 0 and res.out.splitlines() == [ANARCHISM_TEXT, ALBEDO_TEXT]
