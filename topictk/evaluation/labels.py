"""Topic labels: the run's ``labels.tsv``, the labels of seeded topics, and which one a topic
shows.

``labels.tsv`` is plain UTF-8 text in the run directory, one ``topic<TAB>label`` line per
labelled topic, topics numbered from 1 (:mod:`topictk.numbering`); lines starting
with ``#`` and blank lines are skipped, and a first line ``topic<TAB>label`` is taken as a
header (as a spreadsheet writes it). A person may write it by hand, or ``topictk labels``
writes it; the file that command writes starts with :data:`WRITTEN_BY`, and a file without
that line is the user's: the command changes it only with ``--force``.

Which label a topic shows, first found first: the labels file, the label of a seeded topic
(:func:`default_labels`), and, where a command computes one, the suggested label
(:mod:`topictk.evaluation.topic_docs`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from topictk._fileio import atomic_write_text
from topictk.errors import ConfigError, UsageError
from topictk.config.textfile import read_text_file
from topictk.limits import text_lines
from topictk.numbering import topic_number, topic_row

LABELS_FILE = "labels.tsv"
WRITTEN_BY = ("# labels.tsv written by topictk: topic (numbered from 1) <TAB> label; change it "
              "with 'topictk labels RUN --set N=LABEL' or edit it")
MAX_LABEL = 200          # characters; a longer label is not a label
MAX_BYTES = 1 << 20      # a larger labels file is not one


@dataclass(frozen=True)
class Label:
    """A topic's label and where it comes from: ``file`` (a labels file), ``seed`` (the seed
    words of a seeded topic) or ``suggested`` (top words and adjacent pairs)."""

    text: str
    source: str


def clean_label(text: str) -> str:
    """A label as one line: tabs, line breaks and runs of spaces become one space."""
    return " ".join(str(text).split())


def read_labels(path: str | Path, n_topics: int) -> dict[int, str]:
    """The labels of a labels file, by topic row (0-based).

    Raises ConfigError, naming the file and line, for a file that cannot be read or is not
    UTF-8, a line without a tab, a topic that is not a whole number or not a topic of the
    model (1 to ``n_topics``), a topic given twice, and an empty or overlong label."""
    path = Path(path)
    text = read_text_file(path, MAX_BYTES, "labels file", "topic<TAB>label lines",
                          ", or write one with 'topictk labels RUN --set N=LABEL'")
    labels: dict[int, str] = {}
    first_line: dict[int, int] = {}
    for number, line in enumerate(text_lines(text), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        if "\t" not in line:
            raise ConfigError(f"{where}: no tab between topic and label; write "
                              f"'topic<TAB>label', e.g. '3\tspace flight'")
        topic, label = line.split("\t", 1)
        topic = topic.strip()
        if not labels and not first_line and topic.lower() == "topic":
            continue        # a header row
        try:
            row = topic_row(int(topic), n_topics)
        except ValueError as exc:
            what = (str(exc) if topic.lstrip("+-").isdigit()
                    else f"topic {topic!r} is not a whole number; topics are numbered "
                         f"{topic_number(0)} to {topic_number(n_topics - 1)}")
            raise ConfigError(f"{where}: {what} in this run; fix or remove the line") from None
        if row in first_line:
            raise ConfigError(f"{where}: topic {topic_number(row)} is labelled again (first on "
                              f"line {first_line[row]}); keep one line per topic")
        label = clean_label(label)
        if not label:
            raise ConfigError(f"{where}: topic {topic_number(row)} has an empty label; write a "
                              f"label or remove the line")
        if len(label) > MAX_LABEL:
            raise ConfigError(f"{where}: the label of topic {topic_number(row)} has "
                              f"{len(label)} characters; shorten it to {MAX_LABEL} at most")
        labels[row] = label
        first_line[row] = number
    return labels


def written_by_topictk(path: Path) -> bool:
    """Whether the labels file ``path`` starts with the line topictk writes first."""
    try:
        with open(path, "rb") as f:
            first = f.readline(len(WRITTEN_BY.encode()) + 2)
    except OSError:
        return False
    return first.rstrip(b"\r\n") == WRITTEN_BY.encode("utf-8")


def format_labels(labels: Mapping[int, str]) -> str:
    """The text of a labels file topictk writes: :data:`WRITTEN_BY`, then the labels by
    topic."""
    rows = [f"{topic_number(k)}\t{clean_label(labels[k])}" for k in sorted(labels)]
    return "\n".join([WRITTEN_BY, *rows]) + "\n"


def write_labels(path: str | Path, labels: Mapping[int, str], *, force: bool = False) -> None:
    """Write ``labels`` (by topic row) to ``path`` atomically. An existing file that topictk
    did not write (no :data:`WRITTEN_BY` first line) is the user's: refused unless ``force``;
    a folder or anything but a regular file is always refused."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        if path.is_symlink() or not path.is_file():
            raise UsageError(f"{path}: exists and is not a regular file; topictk writes "
                             f"labels to a file of its own: remove it or give another --labels")
        if not force and not written_by_topictk(path):
            raise UsageError(f"{path}: a labels file topictk did not write (its first line is "
                             f"not topictk's); edit it by hand, or add --force to let topictk "
                             f"rewrite it (its comments are dropped)")
    atomic_write_text(path, format_labels(labels))


def labels_path(run_dir: str | Path, labels_file: str | Path | None = None) -> Path:
    """The labels file of a run: ``labels_file`` when given, else the run's labels.tsv."""
    return Path(labels_file) if labels_file is not None else Path(run_dir) / LABELS_FILE


def seed_words_of(config) -> Mapping | None:
    """``model.seed_words`` of a config (a loaded config or a plain dict), None when absent."""
    model = config.get("model") if isinstance(config, Mapping) else getattr(config, "model",
                                                                              None)
    if model is None:
        return None
    if isinstance(model, Mapping):
        return model.get("seed_words")
    getter = getattr(model, "get", None)
    if callable(getter):
        return getter("seed_words")
    return getattr(model, "seed_words", None)


def default_labels(config, n_topics: int) -> dict[int, str]:
    """The labels a run has before anyone labels it, by topic row: the label of each seeded
    topic. ``model.seed_words`` maps labels to their seed words; its i-th label seeds topic
    row i (the order of the mapping), so the first topics of the model carry them. Empty
    when the run has no seeded topics."""
    seeds = seed_words_of(config)
    if not seeds:
        return {}
    if not isinstance(seeds, Mapping):
        raise ConfigError(f"model.seed_words must map labels to lists of words; got "
                          f"{type(seeds).__name__}")
    labels = {}
    for row, name in enumerate(seeds):
        if row >= n_topics:
            break
        label = clean_label(name)
        if label:
            labels[row] = label
    return labels


def run_labels(run_dir: str | Path, config, n_topics: int,
               labels_file: str | Path | None = None,
               suggested: Mapping[int, str] | None = None) -> list[Label | None]:
    """Every topic's label (by row; None: no label): from the labels file (``labels_file``,
    else the run's labels.tsv when it exists), else the seed label of a seeded topic, else
    ``suggested``."""
    path = labels_path(run_dir, labels_file)
    from_file = (read_labels(path, n_topics)
                 if labels_file is not None or path.is_file() else {})
    seeded = default_labels(config, n_topics)
    out: list[Label | None] = []
    for k in range(n_topics):
        if k in from_file:
            out.append(Label(from_file[k], "file"))
        elif k in seeded:
            out.append(Label(seeded[k], "seed"))
        elif suggested and k in suggested:
            out.append(Label(suggested[k], "suggested"))
        else:
            out.append(None)
    return out


def parse_set(values: tuple[str, ...] | list[str], n_topics: int) -> dict[int, str]:
    """``--set N=LABEL`` values as {row: label}; an empty label (``N=``) removes it."""
    out = {}
    for value in values:
        number, sep, label = value.partition("=")
        if not sep:
            raise UsageError(f"--set {value}: write N=LABEL, e.g. --set 3=\"space flight\"")
        try:
            row = topic_row(int(number.strip()), n_topics)
        except ValueError as exc:
            what = str(exc) if number.strip().lstrip("+-").isdigit() else (
                f"topic {number.strip()!r} is not a whole number")
            raise UsageError(f"--set {value}: {what}") from None
        label = clean_label(label)
        if len(label) > MAX_LABEL:
            raise UsageError(f"--set {value[:40]}...: the label has {len(label)} characters; "
                             f"shorten it to {MAX_LABEL} at most")
        out[row] = label
    return out


def labels_for_runs(values: tuple[str, ...] | list[str], runs: list[Path]) -> dict[Path, Path]:
    """``--labels`` of a command reading several runs: ``FILE`` when there is one run, else
    ``RUN=FILE`` for each run given another file than its labels.tsv."""
    out: dict[Path, Path] = {}
    resolved = {Path(r).resolve(): Path(r) for r in runs}
    for value in values:
        run, sep, file = value.rpartition("=")
        if not sep:
            if len(runs) != 1:
                raise UsageError(f"--labels {value}: with {len(runs)} runs, say whose labels "
                                 f"these are: --labels RUN_DIR={value}")
            out[Path(runs[0])] = Path(value)
            continue
        match = resolved.get(Path(run).resolve())
        if match is None:
            raise UsageError(f"--labels {value}: {run} is not one of the runs given; write "
                             f"--labels RUN_DIR=FILE for one of: "
                             f"{', '.join(str(r) for r in runs)}")
        out[match] = Path(file)
    return out
