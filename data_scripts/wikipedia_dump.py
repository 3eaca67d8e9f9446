"""Stream plain-text articles out of a MediaWiki XML export (e.g. a Wikipedia pages-articles dump).

Command line::

    python data_scripts/wikipedia_dump.py enwiki-latest-pages-articles.xml.bz2 > articles.txt
    python data_scripts/wikipedia_dump.py DUMP [--out FILE] [--max-articles N] [--min-words N] \
        [--titles]

The dump may be plain XML or bz2/gzip-compressed (detected from the content). It is parsed
incrementally with ``xml.etree.ElementTree.iterparse`` and every page element is cleared once
handled, so memory use does not grow with the size of the dump.

Pages are skipped when they are redirects (a ``<redirect>`` element, or text starting with
``#REDIRECT``) or are not in the article namespace (``<ns>`` other than 0). The wikitext of the
last revision is reduced to plain text: comments, ``<ref>`` elements (and ``<math>``/``<gallery>``
blocks), templates ``{{...}}`` (nested), tables ``{| ... |}``, File/Image/Category links and
behaviour switches such as ``__TOC__`` are removed; ``[[target|label]]`` becomes ``label``,
``[[target]]`` becomes ``target``, ``[http://x label]`` becomes ``label``; bold/italic quotes,
heading ``=`` marks, list markers and other HTML tags are dropped (their content is kept), and
HTML entities are decoded.

Output: one article per line, whitespace collapsed to single spaces; with ``--titles`` each line
is ``title<TAB>text``. ``--min-words N`` skips articles with fewer than N words,
``--max-articles N`` stops after N articles.

A truncated or non-MediaWiki file is an error naming the file (exit status 1). Articles already
written to stdout stay written; with ``--out FILE`` the partial output file is removed. Usage
errors exit with status 2.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import html
import re
import sys
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from _common import ArgumentParser, AtomicFile, DataError, UsageError, require_input_file, run_main

PROG = "wikipedia_dump.py"

# --------------------------------------------------------------------------- wikitext -> text

_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_REF_SELF_CLOSING_RE = re.compile(r"<ref\b[^>]*/\s*>", re.IGNORECASE)
_DROPPED_ELEMENTS_RE = re.compile(
    r"<(ref|math|gallery|timeline|score|chem|ce)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL
)
_TAG_RE = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)\b[^<>]*/?>")
_BREAKING_TAGS = frozenset(
    {"br", "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "tr", "td", "th", "table", "hr"}
    | {"blockquote", "center", "pre", "poem", "h1", "h2", "h3", "h4", "h5", "h6"}
)
_TEMPLATE_TOKEN_RE = re.compile(r"\{\{|\}\}")
_TABLE_TOKEN_RE = re.compile(r"^[ \t]*(\{\||\|\})", re.MULTILINE)
_INNER_LINK_RE = re.compile(r"\[\[([^\[\]]*)\]\]")
_DROPPED_LINK_PREFIXES = ("file", "image", "category")
_EXTERNAL_LINK_RE = re.compile(
    r"\[(?:[A-Za-z][A-Za-z0-9+.-]*://|//|mailto:)[^\s\]]*(?:\s+([^\]]*))?\]"
)
_HEADING_RE = re.compile(r"^[ \t]*(=+)[ \t]*(.*?)[ \t]*\1[ \t]*$", re.MULTILINE)
_BOLD_ITALIC_RE = re.compile(r"'{2,}")
_SWITCH_RE = re.compile(r"__[A-Z]+__")
_LIST_MARKER_RE = re.compile(r"^[ \t]*[*#:;]+[ \t]*", re.MULTILINE)
_RULE_RE = re.compile(r"^-{4,}", re.MULTILINE)
_WS_RE = re.compile(r"\s+")


def _remove_balanced(text: str, token_re: re.Pattern[str], opener: str) -> str:
    """Remove every balanced opener...closer region (nesting allowed).

    An opener without a closer, or a closer without an opener, is dropped on its own and the
    text around it is kept.
    """
    stack: list[int] = []
    cut: list[tuple[int, int]] = []
    for match in token_re.finditer(text):
        token = match.group(match.lastindex or 0)
        start = match.start(match.lastindex or 0)
        if token == opener:
            stack.append(start)
        elif stack:
            cut.append((stack.pop(), match.end()))
        else:
            cut.append((start, match.end()))
    cut.extend((start, start + len(opener)) for start in stack)
    if not cut:
        return text
    cut.sort()
    pieces: list[str] = []
    pos = 0
    for start, end in cut:
        if start > pos:
            pieces.append(text[pos:start])
        pos = max(pos, end)
    pieces.append(text[pos:])
    return "".join(pieces)


def _replace_link(match: re.Match[str]) -> str:
    inner = match.group(1)
    target, _, rest = inner.partition("|")
    target = target.strip()
    prefix = target.split(":", 1)[0].strip().lower() if ":" in target else ""
    if prefix in _DROPPED_LINK_PREFIXES:
        return ""
    if rest:
        label = rest.rsplit("|", 1)[-1].strip()
        if label:
            return label
    shown = target.lstrip(":")
    if "#" in shown and not shown.startswith("#"):
        shown = shown.split("#", 1)[0]
    return shown


def _replace_links(text: str) -> str:
    """Resolve ``[[...]]`` links from the innermost out (captions of file links may hold links)."""
    while True:
        new = _INNER_LINK_RE.sub(_replace_link, text)
        if new == text:
            return new
        text = new


def wikitext_to_text(wikitext: str) -> str:
    """Reduce MediaWiki markup to plain text on a single line."""
    text = _COMMENT_RE.sub("", wikitext)
    text = _REF_SELF_CLOSING_RE.sub("", text)
    text = _DROPPED_ELEMENTS_RE.sub("", text)
    if "{{" in text or "}}" in text:
        text = _remove_balanced(text, _TEMPLATE_TOKEN_RE, "{{")
    if "{|" in text or "|}" in text:
        text = _remove_balanced(text, _TABLE_TOKEN_RE, "{|")
    if "[[" in text:
        text = _replace_links(text)
    if "[" in text:
        text = _EXTERNAL_LINK_RE.sub(lambda m: m.group(1) or "", text)
    text = _HEADING_RE.sub(r"\2", text)
    text = _BOLD_ITALIC_RE.sub("", text)
    text = _SWITCH_RE.sub("", text)
    text = _LIST_MARKER_RE.sub("", text)
    text = _RULE_RE.sub("", text)
    text = _TAG_RE.sub(lambda m: " " if m.group(1).lower() in _BREAKING_TAGS else "", text)
    text = html.unescape(text)
    return _WS_RE.sub(" ", text).strip()


# --------------------------------------------------------------------------- dump reading


@dataclass(frozen=True)
class Page:
    title: str
    ns: int | None
    redirect: bool
    text: str


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _open_dump(path: Path) -> BinaryIO:
    with open(path, "rb") as fh:
        magic = fh.read(3)
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rb")  # type: ignore[return-value]
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def iter_pages(stream: BinaryIO, path: Path) -> Iterator[Page]:
    """Yield every ``<page>`` of a MediaWiki export, clearing parsed elements as it goes."""
    root: ET.Element | None = None
    namespaces: set[str] = set()  # names of non-article namespaces, from <siteinfo>
    try:
        for event, elem in ET.iterparse(stream, events=("start", "end")):
            tag = _local(elem.tag)
            if root is None:
                if tag != "mediawiki":
                    raise DataError(
                        f"{path}: not a MediaWiki XML export "
                        f"(root element is <{tag}>, expected <mediawiki>)"
                    )
                root = elem
                continue
            if event != "end":
                continue
            if tag == "namespace" and elem.get("key") not in (None, "0") and elem.text:
                namespaces.add(elem.text.strip())
            elif tag == "siteinfo":
                root.clear()
            elif tag == "page":
                yield _page_from_element(elem, namespaces)
                root.clear()
        if root is None:
            raise DataError(f"{path}: empty file (expected a MediaWiki XML export)")
    except ET.ParseError as exc:
        if root is None:
            raise DataError(
                f"{path}: not a MediaWiki XML export (not well-formed XML: {exc})"
            ) from None
        raise DataError(
            f"{path}: truncated or malformed XML ({exc}); expected a complete MediaWiki XML export"
        ) from None
    except (EOFError, OSError, zlib.error) as exc:
        reason = str(exc) or type(exc).__name__
        what = "truncated" if isinstance(exc, EOFError) else "unreadable"
        raise DataError(f"{path}: {what} compressed file ({reason})") from None


def _page_from_element(page: ET.Element, namespaces: set[str]) -> Page:
    title = ""
    ns: int | None = None
    redirect = False
    text = ""
    for child in page:
        tag = _local(child.tag)
        if tag == "title":
            title = (child.text or "").strip()
        elif tag == "ns":
            try:
                ns = int((child.text or "").strip())
            except ValueError:
                ns = None
        elif tag == "redirect":
            redirect = True
        elif tag == "revision":  # the last revision wins
            for field in child:
                if _local(field.tag) == "text":
                    text = field.text or ""
    if ns is None:
        # Old exports have no <ns>: infer it from a namespace prefix of the title.
        prefix, sep, _ = title.partition(":")
        ns = 1 if sep and prefix in namespaces else 0
    if text.lstrip()[:9].upper() == "#REDIRECT":
        redirect = True
    return Page(title=title, ns=ns, redirect=redirect, text=text)


def extract(
    path: Path,
    out: IO[str],
    max_articles: int | None = None,
    min_words: int = 0,
    titles: bool = False,
) -> int:
    """Write the articles of the dump at ``path`` to ``out``; return how many were written."""
    written = 0
    if max_articles == 0:
        return 0
    try:
        stream = _open_dump(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot open ({exc.strerror or exc})") from None
    with stream:
        for page in iter_pages(stream, path):
            if page.redirect or page.ns != 0:
                continue
            text = wikitext_to_text(page.text)
            if min_words and len(text.split()) < min_words:
                continue
            if titles:
                out.write(_WS_RE.sub(" ", page.title).strip() + "\t" + text + "\n")
            else:
                out.write(text + "\n")
            written += 1
            if max_articles is not None and written >= max_articles:
                break
    return written


# --------------------------------------------------------------------------- command line


def _non_negative(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a non-negative integer, got {value!r}"
        ) from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}")
    return n


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="Extract plain-text articles (one per line) from a MediaWiki XML export "
        "(.xml or .xml.bz2).",
    )
    parser.add_argument(
        "dump", metavar="DUMP", type=Path, help="MediaWiki XML export, plain or bz2-compressed"
    )
    parser.add_argument("--out", metavar="FILE", type=Path, help="output file (default: stdout)")
    parser.add_argument(
        "--max-articles", metavar="N", type=_non_negative, help="stop after N articles"
    )
    parser.add_argument(
        "--min-words",
        metavar="N",
        type=_non_negative,
        default=0,
        help="skip articles with fewer than N words",
    )
    parser.add_argument(
        "--titles", action="store_true", help="prefix each line with the title and a TAB"
    )
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    require_input_file(args.dump)
    options = {
        "max_articles": args.max_articles,
        "min_words": args.min_words,
        "titles": args.titles,
    }
    if args.out is not None:
        with AtomicFile(args.out, "w", encoding="utf-8") as target:
            n = extract(args.dump, target.file, **options)
    else:
        if hasattr(sys.stdout, "reconfigure"):
            sys.stdout.reconfigure(encoding="utf-8")
        try:
            n = extract(args.dump, sys.stdout, **options)
        except DataError:
            sys.stdout.flush()  # articles streamed before the error stay written
            raise
        sys.stdout.flush()
    if not args.quiet:
        print(
            f"{PROG}: {n} articles" + (f" written to {args.out}" if args.out else ""),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_main(PROG, main, None))
