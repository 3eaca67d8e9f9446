"""The documentation holds together: every section of docs/algorithms.md that the code cites
exists, the README stays a short first page, and every relative link of README.md and docs/
points at a file (and, for a ``#fragment``, at a heading) that exists."""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALGORITHMS = ROOT / "docs" / "algorithms.md"
README = ROOT / "README.md"
README_MAX_LINES = 150
CODE_DIRS = ("topictk", "tests", "benchmarks")
CODE_SUFFIXES = (".py", ".pyx", ".pxd")

# "ALGORITHMS.md §8.6-§8.9", "docs/algorithms.md §3, §5, §11.2", "ALGORITHMS.md §1.6/§8":
# a citation names its first section after the file and may chain further ones
_SECTION = r"§(?:[0-9]+(?:\.[0-9]+)*|[A-Z]\b)"
_CITATION = re.compile(
    r"(?:ALGORITHMS|docs/algorithms)\.md,?\s+(" + _SECTION
    + r"(?:\s*(?:,|-|–|/|;|and|or)\s*" + _SECTION + r")*)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_NUMBERED = re.compile(r"^(?:Appendix\s+([A-Z])\b|([0-9]+(?:\.[0-9]+)*)[.\s])")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)


def cited_sections(text: str) -> set[str]:
    """The section labels ("8.6", "A") of every citation of the algorithms document."""
    found = set()
    for match in _CITATION.finditer(text):
        for label in re.findall(_SECTION, match.group(1)):
            found.add(label[1:].rstrip("."))
    return found


def headings(text: str) -> list[str]:
    """The text of every heading outside fenced code blocks."""
    text = _FENCE.sub("", text)
    return [m.group(2) for line in text.splitlines() if (m := _HEADING.match(line))]


def section_labels(text: str) -> set[str]:
    """Labels of the numbered headings: "## 4. CVB" -> "4", "### 4.2 Gaussian" -> "4.2",
    "## Appendix A. Index" -> "A"."""
    labels = set()
    for heading in headings(text):
        m = _NUMBERED.match(heading.replace("§", ""))
        if m:
            labels.add(m.group(1) or m.group(2))
    return labels


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    heading = re.sub(r"`|\*\*|\$", "", heading).strip().lower()
    kept = "".join(ch for ch in heading
                   if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(text):
        base = anchor(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def code_files() -> list[Path]:
    files = []
    for folder in CODE_DIRS:
        files += [p for p in sorted((ROOT / folder).rglob("*")) if p.suffix in CODE_SUFFIXES]
    return files


def markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def broken_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):      # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif (fragment and dest.suffix == ".md"
              and fragment not in anchors(dest.read_text(encoding="utf-8"))):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_cited_section_is_a_heading_of_algorithms_md():
    labels = section_labels(ALGORITHMS.read_text(encoding="utf-8"))
    missing = []
    for path in code_files():
        for label in sorted(cited_sections(path.read_text(encoding="utf-8"))):
            if label not in labels:
                missing.append(f"{path.relative_to(ROOT)}: §{label}")
    assert not missing, "sections cited but not in docs/algorithms.md:\n" + "\n".join(missing)


def test_the_code_cites_algorithms_md():
    # guards the test above against a pattern that silently matches nothing
    cited = set().union(*(cited_sections(p.read_text(encoding="utf-8")) for p in code_files()))
    assert len(cited) >= 20


def test_citation_parser():
    text = ("(ALGORITHMS.md §8.6-§8.9) see docs/algorithms.md §3, §5, §11.2. "
            "ALGORITHMS.md §1.6/§8 oracle (g); ALGORITHMS.md §10. and docs/algorithms.md §A")
    assert cited_sections(text) == {"8.6", "8.9", "3", "5", "11.2", "1.6", "8", "10", "A"}
    page = "## 4. CVB\n### 4.2 Gaussian\n```\n## 9. in code\n```\n## Appendix A. Choices\n"
    assert section_labels(page) == {"4", "4.2", "A"}
    labels = section_labels(page)
    assert cited_sections("ALGORITHMS.md §4.3") - labels == {"4.3"}     # a missing section


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; keep it to a first page"


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: p.name)
def test_relative_links_resolve(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: {broken_links(page)}"


def test_anchor_rules():
    assert anchor("2. Collapsed Gibbs sampling (Griffiths & Steyvers 2004), SparseLDA, AD-LDA") \
        == "2-collapsed-gibbs-sampling-griffiths--steyvers-2004-sparselda-ad-lda"
    assert anchor("`topictk infer`: topic proportions") == "topictk-infer-topic-proportions"
    assert anchor("8.11 DLDA held-out perplexity (Cong 2017 §5)") \
        == "811-dlda-held-out-perplexity-cong-2017-5"
