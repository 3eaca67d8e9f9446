"""Word intrusion (Chang, Boyd-Graber, Gerrish, Wang & Blei 2009, "Reading Tea Leaves: How
Humans Interpret Topic Models"): people judge whether a topic's top words belong together.

Each task shows a topic's top words and one intruder, shuffled; a judge picks the word that
does not belong. The intruder is a word with a low probability in the topic (in the bottom
half of its ranking) and a high probability in another topic (among that topic's top words),
so it is plausible on its own but foreign to the group. A topic whose words hang together
lets judges find it: the share of judges who do is the topic's *model precision*
(Chang et al.'s MP).

The tasks and the answer key are two separate outputs (``topictk export --what intrusion
--out TASKS --key KEY``): the judges get the first only. The draws come from one random stream
of the seed (docs/algorithms.md §12.3), so the same run and seed give the same files.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topictk.errors import UsageError
from topictk.evaluation.coherence import top_words
from topictk.evaluation.topic_listing import listing
from topictk.numbering import topic_number
from topictk.evaluation.tsv import tsv_rows
from topictk.streams import INTRUSION, make_stream

TOP = 5                 # the topic's words shown (Chang et al.: five)
SOURCE_TOP = 10         # an intruder is among the top words of another topic
FALLBACK_EXCLUDE = 50   # ... failing one in its bottom half: outside its top 50


@dataclass
class IntrusionTasks:
    """The word-intrusion tasks of a model and their answer key.

    Attributes
    ----------
    tasks : list of dict
        One per topic, in the model's order: ``topic`` (its number, from 1), ``words`` (the
        six words in the order shown).
    key : list of dict
        One per topic: ``topic``, ``position`` (1-based, in ``words``), ``intruder``,
        ``source_topic`` (the topic the intruder is a top word of), ``intruder_rank`` (its
        rank in this topic: 1 + the words more probable), ``rule`` (``bottom half`` or
        ``outside the top 50``), ``words`` (as shown).
    meta : dict
        ``run``, ``seed`` and the selection rule; written to the key only.
    """

    tasks: list[dict]
    key: list[dict]
    meta: dict

    def to_bytes(self, fmt: str) -> bytes:
        """The tasks for the judges (no intruder, no run, no seed) as ``fmt`` (tsv or json)."""
        if fmt == "json":
            return (json.dumps({"tasks": self.tasks}, ensure_ascii=False) + "\n").encode()
        n = max((len(t["words"]) for t in self.tasks), default=TOP + 1)
        return tsv_rows([["topic", *(f"word_{i}" for i in range(1, n + 1))],
                         *([t["topic"], *t["words"]] for t in self.tasks)]).encode("utf-8")

    def key_bytes(self, fmt: str) -> bytes:
        """The answer key as ``fmt`` (tsv or json)."""
        if fmt == "json":
            return (json.dumps({**self.meta, "key": self.key}, ensure_ascii=False)
                    + "\n").encode()
        n = max((len(k["words"]) for k in self.key), default=TOP + 1)
        return tsv_rows([["topic", "position", "intruder", "source_topic", "intruder_rank",
                          *(f"word_{i}" for i in range(1, n + 1))],
                         *([k["topic"], k["position"], k["intruder"], k["source_topic"],
                            k["intruder_rank"], *k["words"]] for k in self.key)]
                        ).encode("utf-8")


def intrusion_tasks(topic_word: np.ndarray, vocab: list[str], seed: int, *,
                    top: int = TOP, source_top: int = SOURCE_TOP,
                    meta: dict | None = None) -> IntrusionTasks:
    """One word-intrusion task per topic.

    For topic k: its ``top`` most probable words (ties by word id), and an intruder drawn
    uniformly from the candidates: words among the ``source_top`` most probable of some other
    topic and in the bottom half of topic k's probabilities (no more probable than its
    median word; or, when there is none, no more probable than its word ranked
    ``FALLBACK_EXCLUDE + 1``, looser when V > 100) and not shown; then the ``top + 1`` words in a
    random order. The draws, topic by topic, come from the stream ``INTRUSION`` of ``seed``.

    Parameters
    ----------
    topic_word : numpy.ndarray
        phi, (K, V), K >= 2.
    vocab : list of str
        The V words.
    seed : int
        Seed of the draws.

    Raises
    ------
    ValueError
        With fewer than two topics, or a vocabulary too small to hold an intruder.
    """
    phi = np.asarray(topic_word, dtype=np.float64)
    K, V = phi.shape
    if K < 2:
        raise ValueError(f"word intrusion needs two topics or more (an intruder comes from "
                         f"another topic); the model has {K}")
    order = top_words(phi, V)                               # (K, V) ranking, ties by word id
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(V)[None, :], axis=1)   # rank[k, w]: 0 = best
    source_top = min(source_top, V)
    rng = np.random.Generator(make_stream(int(seed), INTRUSION))
    tasks, key = [], []
    for k in range(K):
        shown = order[k, :top]
        pool = np.zeros(V, dtype=bool)              # top words of the other topics
        pool[order[np.arange(K) != k, :source_top].ravel()] = True
        # the bottom half of the topic's probabilities (at most its median: the words tied
        # at the median, such as a Gibbs topic's many unused words, all count); failing that,
        # outside its top 50 (looser when V > 100); never a word shown
        for place, rule in ((V // 2, "bottom half"),
                            (min(FALLBACK_EXCLUDE, V // 2), f"outside the top {FALLBACK_EXCLUDE}")):
            low = phi[k] <= phi[k, order[k, place]]
            candidates = np.flatnonzero(pool & low & (rank[k] >= top))
            if candidates.size:
                break
        else:
            raise ValueError(f"topic {topic_number(k)}: no word of another topic's top "
                             f"{source_top} is in the bottom half of its ranking or outside "
                             f"its top {FALLBACK_EXCLUDE}; the topics share their top words")
        intruder = int(candidates[rng.integers(candidates.size)])     # ascending word ids
        words = [*(int(w) for w in shown), intruder]
        shuffled = [words[i] for i in rng.permutation(len(words))]
        # the other topic where the intruder ranks best (ties by word id; then the lower topic)
        others = [j for j in range(K) if j != k]
        source = others[int(np.argmin(rank[others, intruder]))]
        names = [vocab[w] for w in shuffled]
        tasks.append({"topic": topic_number(k), "words": names})
        key.append({"topic": topic_number(k), "position": shuffled.index(intruder) + 1,
                    "intruder": vocab[intruder], "source_topic": topic_number(source),
                    "intruder_rank": int(np.count_nonzero(phi[k] > phi[k, intruder])) + 1,
                    "rule": rule,
                    "words": names})
    info = {**(meta or {}), "seed": int(seed), "top": int(top), "source_top": int(source_top),
            "selection": "intruder: a word among the top source_top of another topic, no more "
                         "probable in this topic than its median word (else than its word "
                         f"ranked {FALLBACK_EXCLUDE + 1}), not one of the top words shown"}
    return IntrusionTasks(tasks, key, info)


def intrusion_export(run, fold_in) -> IntrusionTasks:
    """``topictk export --what intrusion``: the tasks of a loaded run's topics (the bottom
    layer of a deep model), drawn with ``fold_in.seed`` (default: the run's
    ``training.seed``). Topics show no labels: the judges see words only."""
    seed = int(run.config.training.seed if fold_in.seed is None else fold_in.seed)
    phi = np.asarray(run.topic_word(), dtype=np.float64)
    meta = {"run": str(run.run_dir), "algorithm": run.config.inference.algorithm,
            "topics": int(phi.shape[0])}
    shown = listing(run)
    if shown is not None:       # an HDP run: its live topics, under their own numbers
        phi, meta["topics"] = phi[shown.rows], len(shown.rows)
    try:
        tasks = intrusion_tasks(phi, list(run.store.vocab), seed, meta=meta)
    except ValueError as exc:
        raise UsageError(f"--what intrusion: {run.run_dir}: {exc}") from None
    if shown is not None:
        ids = shown.ids
        for row in (*tasks.tasks, *tasks.key):
            for field in ("topic", "source_topic"):
                if field in row:
                    row[field] = ids[row[field] - 1]
    return tasks


# ------------------------------------------------------------------------------- scoring
def read_key(path: str | Path) -> dict[int, dict]:
    """An answer key written by ``topictk export --what intrusion --key`` (TSV or JSON), by
    topic number."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        rows = json.loads(text)["key"]
    else:
        rows = list(csv.DictReader(io.StringIO(text, newline=""), delimiter="\t"))
    try:
        return {int(r["topic"]): {"intruder": str(r["intruder"]),
                                  "words": r.get("words") or _word_columns(r)} for r in rows}
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{path}: not an intrusion answer key (columns topic, position, "
                         f"intruder, ...); give the --key file of 'topictk export --what "
                         f"intrusion'") from None


def _word_columns(row: dict) -> list[str]:
    """The words shown, from the ``word_1`` ... columns of a TSV key."""
    return [row[c] for c in sorted((c for c in row if c and c.startswith("word_")),
                                   key=lambda c: int(c[5:])) if row[c] is not None]


def read_answers(path: str | Path) -> list[tuple[int, str, int]]:
    """Judges' answers: a TSV with the columns ``topic`` and ``word`` (a header line; other
    columns, such as a judge's name, are ignored), one line per judge and topic. Returns
    (topic, word, line number) triples."""
    path = Path(path)
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        if not reader.fieldnames or not {"topic", "word"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: the first line must name the columns topic and word "
                             f"(tab-separated); got {reader.fieldnames}")
        out = []
        for row in reader:
            line = reader.line_num
            try:
                out.append((int(row["topic"]), str(row["word"]).strip(), line))
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{line}: topic must be a topic number; got "
                                 f"{row['topic']!r}") from None
    return out


def model_precision(answers: str | Path, key: str | Path) -> dict:
    """Model precision of every topic (Chang et al. 2009): the share of judges' answers that
    name the topic's intruder.

    Parameters
    ----------
    answers : str or Path
        The judges' answers, a TSV with the columns ``topic`` and ``word``.
    key : str or Path
        The answer key of the tasks they judged.

    Returns
    -------
    dict
        ``per_topic``: topic number -> {``precision``, ``answers``, ``intruder``} for every
        topic of the key (``precision`` None for a topic nobody judged); ``mean``: the mean
        precision over the judged topics (None when none was).

    Raises
    ------
    ValueError
        An answer for a topic the key does not hold, or a word that was not among the topic's
        six (named by its file and line).
    """
    keys = read_key(key)
    hits = {t: [] for t in keys}
    for number, word, line in read_answers(answers):
        if number not in keys:
            raise ValueError(f"{answers}:{line}: topic {number} is not in the key {key} "
                             f"(topics {min(keys)} to {max(keys)})")
        shown = keys[number]["words"]
        if shown and word not in shown:
            raise ValueError(f"{answers}:{line}: {word!r} was not shown for topic {number} "
                             f"(shown: {' '.join(shown)})")
        hits[number].append(word == keys[number]["intruder"])
    per_topic = {t: {"precision": (sum(h) / len(h)) if h else None, "answers": len(h),
                     "intruder": keys[t]["intruder"]} for t, h in hits.items()}
    judged = [v["precision"] for v in per_topic.values() if v["precision"] is not None]
    return {"per_topic": per_topic, "mean": (sum(judged) / len(judged)) if judged else None}


__all__ = ["IntrusionTasks", "intrusion_tasks", "model_precision", "read_answers", "read_key"]
