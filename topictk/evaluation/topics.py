"""Top words per topic with their probabilities, as text, TSV or JSON; for deep models
(model.family: dlda) per layer, and the topic hierarchy as a tree (text, TSV, JSON, DOT)."""
from __future__ import annotations

import json

import numpy as np

from topictk.errors import UsageError
from topictk.evaluation.coherence import top_words
from topictk.numbering import topic_number
from topictk.evaluation.tsv import tsv_rows


def topic_table(topic_word: np.ndarray, vocab: list[str], n: int) -> list[dict]:
    """[{"topic": number, "words": [{"word", "probability"}...]}] for every topic, numbered
    from 1 (:mod:`topictk.numbering`), words by probability descending, exact ties
    by ascending word id."""
    top = top_words(topic_word, min(n, topic_word.shape[1]))
    return ranked_table(top, np.take_along_axis(topic_word, top, axis=1), vocab)


def ranked_table(top: np.ndarray, probabilities: np.ndarray, vocab: list[str]) -> list[dict]:
    """:func:`topic_table` from the (K, n) top word ids and their probabilities."""
    return [{"topic": topic_number(k),
             "words": [{"word": vocab[w], "probability": float(p)} for w, p in zip(row, probs)]}
            for k, (row, probs) in enumerate(zip(top, probabilities))]


def listed_table(driver, state, table: list[dict]) -> list[dict]:
    """``table`` (a dict per topic, in row order) cut to the topics the driver lists, in its
    order (:meth:`~topictk.inference.base.Driver.listed_topics`: the live topics of a
    hierarchical Dirichlet process, largest first, each under its own number), each with its
    ``weights`` ({name: value}) when the driver has any; ``table`` itself otherwise."""
    listed = driver.listed_topics(state)
    if listed is None:
        return table
    weights = driver.topic_weights(state) or {}
    out = [table[k] for k in listed]
    if weights:
        for k, t in zip(listed, out):
            t["weights"] = {name: float(w[k]) for name, w in weights.items()}
    return out


def weights_text(t: dict) -> str:
    """A topic's weights as text (``pi 0.231, share 0.198``); empty without weights."""
    return ", ".join(f"{name} {value:.3f}" for name, value in (t.get("weights") or {}).items())


def format_topics(table: list[dict], fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"topics": table}, indent=None) + "\n"
    if fmt == "tsv" and any("weights" in t for t in table):
        # a hierarchical Dirichlet process: the topic's weights before its words
        names = list(next(t["weights"] for t in table if "weights" in t))
        labelled = any("label" in t for t in table)
        return tsv_rows([("topic", *names, *(("label",) if labelled else ()), "rank", "word",
                          "probability"),
                         *((t["topic"], *(f"{t['weights'][n]:.6g}" for n in names),
                            *((t.get("label") or "",) if labelled else ()), rank, w["word"],
                            f"{w['probability']:.6g}")
                           for t in table for rank, w in enumerate(t["words"], start=1))])
    if fmt == "tsv":
        if any("label" in t for t in table):     # a labels file or seed labels: a column
            return tsv_rows([("topic", "label", "rank", "word", "probability"),
                             *((t["topic"], t.get("label") or "", rank, w["word"],
                                f"{w['probability']:.6g}")
                               for t in table for rank, w in enumerate(t["words"], start=1))])
        return tsv_rows([("topic", "rank", "word", "probability"),
                         *((t["topic"], rank, w["word"], f"{w['probability']:.6g}")
                           for t in table for rank, w in enumerate(t["words"], start=1))])
    lines = []
    for t in table:
        words = " ".join(f"{w['word']}({w['probability']:.3f})" for w in t["words"])
        lines.append(f"{t['topic']:>3}  {words}")
        if t.get("weights"):    # a hierarchical Dirichlet process: pi and the token share
            lines.append(f"     weight: {weights_text(t)}")
        if t.get("features"):   # DMR: the metadata features with the largest weights nu
            feats = " ".join(f"{f['feature']}({f['weight']:+.3f})" for f in t["features"])
            lines.append(f"     metadata: {feats}")
        lines.extend(topic_extra_lines(t))
    return "\n".join(lines) + "\n"


def topic_extra_lines(t: dict) -> list[str]:
    """The text lines of a topic's label and representative documents, when it has them
    (``topics --labels``/labels.tsv, ``topics --docs``)."""
    from topictk.evaluation.topic_listing import extra_lines

    return extra_lines(t)


# --------------------------------------------------------------------------- deep models
def layer_tables(driver, state, vocab: list[str], n: int, layers: list[int]) -> list[dict]:
    """[{"layer": l, "topics": topic_table(...)}] with each layer's topics projected to words
    (Phi^(1) ... Phi^(l-1) phi_k^(l); docs/algorithms.md §11.5)."""
    return [{"layer": l, "topics": topic_table(driver.layer_topic_word(state, l), vocab, n)}
            for l in layers]


def format_layers(tables: list[dict], fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"layers": tables}) + "\n"
    if fmt == "tsv":
        return tsv_rows([("layer", "topic", "rank", "word", "probability"),
                         *((table["layer"], t["topic"], rank, w["word"],
                            f"{w['probability']:.6g}")
                           for table in tables for t in table["topics"]
                           for rank, w in enumerate(t["words"], start=1))])
    lines = []
    for i, table in enumerate(tables):
        if i:
            lines.append("")
        lines.append(f"layer {table['layer']}")
        lines.append(format_topics(table["topics"], "text").rstrip("\n"))
    return "\n".join(lines) + "\n"


def layer_usage(phis: list[np.ndarray], r: np.ndarray) -> list[np.ndarray]:
    """Prior mass reaching each topic from the top: u^(L) = r, u^(l) = Phi^(l+1) u^(l+1);
    u[l - 1] is layer l's (K_l,) vector. Used to order the roots of a tree."""
    usage = [np.asarray(r, dtype=np.float64)]
    for p in reversed(phis[1:]):
        usage.insert(0, p @ usage[0])
    return usage


def topic_tree(driver, state, vocab: list[str], n_words: int, n_children: int,
               root_layer: int) -> list[dict]:
    """Topics of ``root_layer`` (strongest first) with, recursively down to layer 1, their
    ``n_children`` strongest children: the lower-layer topics v with the largest phi_vk^(l).
    Node: {"layer", "topic" (numbered from 1), "weight", "words": [word...],
    "children": [node...]}; a root's
    weight is its share of the prior mass (layer_usage), a child's weight is phi_vk^(l)."""
    phis = [driver.layer_weights(state, l) for l in range(1, len(state.layers) + 1)]
    words = {l: top_words(driver.layer_topic_word(state, l), n_words)
             for l in range(1, root_layer + 1)}
    usage = layer_usage(phis, state.r)[root_layer - 1]

    def node(layer: int, k: int, weight: float) -> dict:
        out = {"layer": layer, "topic": topic_number(k), "weight": float(weight),
               "words": [vocab[w] for w in words[layer][k]], "children": []}
        if layer > 1:
            column = phis[layer - 1][:, k]
            for v in np.argsort(-column, kind="stable")[:n_children]:
                out["children"].append(node(layer - 1, int(v), column[v]))
        return out

    share = usage / usage.sum()
    return [node(root_layer, int(k), share[k]) for k in np.argsort(-share, kind="stable")]


def _walk(nodes: list[dict], depth: int = 0, parent: dict | None = None):
    for n in nodes:
        yield depth, parent, n
        yield from _walk(n["children"], depth + 1, n)


def format_tree(tree: list[dict], fmt: str) -> str:
    """The hierarchy as indented text, TSV (one row per edge), JSON or Graphviz DOT."""
    if fmt == "json":
        return json.dumps({"tree": tree}) + "\n"
    if fmt == "tsv":
        rows = [("depth", "layer", "topic", "parent_layer", "parent_topic", "weight", "words")]
        for depth, parent, n in _walk(tree):
            pl, pt = (parent["layer"], parent["topic"]) if parent else ("", "")
            rows.append((depth, n["layer"], n["topic"], pl, pt, f"{n['weight']:.6g}",
                         " ".join(n["words"])))
        return tsv_rows(rows)
    if fmt == "dot":
        def ident(n):
            return f"L{n['layer']}_{n['topic']}"

        def quote(text):
            text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            return '"' + text + '"'

        lines = ["digraph dlda {", "  rankdir=TB;", "  node [shape=box, fontsize=10];"]
        seen, edges = set(), set()
        for _, parent, n in _walk(tree):
            if ident(n) not in seen:
                seen.add(ident(n))
                label = f"L{n['layer']} #{n['topic']}\n" + " ".join(n["words"])
                lines.append(f"  {ident(n)} [label={quote(label)}];")
            if parent is not None and (ident(parent), ident(n)) not in edges:
                edges.add((ident(parent), ident(n)))
                width = 0.5 + 4.0 * min(1.0, n["weight"])
                lines.append(f"  {ident(parent)} -> {ident(n)} [label=\"{n['weight']:.3f}\", "
                             f"penwidth={width:.2f}];")
        lines.append("}")
        return "\n".join(lines) + "\n"
    lines = []
    for depth, parent, n in _walk(tree):
        lines.append(f"{'    ' * depth}L{n['layer']} #{n['topic']} ({n['weight']:.3f})  "
                     f"{' '.join(n['words'])}")
    return "\n".join(lines) + "\n"


def render_topics(driver, state, vocab: list[str], *, top: int, fmt: str,
                  layer: int | None = None, tree: bool = False, children: int = 3,
                  features: int = 3, annotate=None) -> str:
    """What ``topictk topics`` prints: top words of every topic, for deep models per layer
    (``layer`` picks one) or, with ``tree`` (or ``fmt`` dot), the hierarchy rooted at
    ``layer`` (default: the top layer). For DMR, each topic also lists the ``features``
    metadata features with the largest weights nu (text and JSON). ``annotate``, when given,
    adds fields to the table of a flat model's topics before it is written (labels and
    representative documents: :mod:`topictk.evaluation.topic_listing`)."""
    deep = driver.traits.layered
    depth = len(state.layers) if deep else 1
    if fmt == "dot":
        tree = True
    if not deep and (tree or (layer is not None and layer != 1)):
        what = "--tree and --format dot need" if tree else "--layer > 1 needs"
        raise UsageError(f"{what} a deep model (model.family: dlda); this run is "
                         f"{driver.name}")
    if layer is not None and layer > depth:
        raise UsageError(f"--layer must be between 1 and {depth} (the model's layers); "
                         f"got {layer}")
    if tree:
        root = depth if layer is None else layer
        return format_tree(topic_tree(driver, state, vocab, top, children, root), fmt)
    if not deep:
        # a driver that ranks the words without forming topic_word (a WarpLDA chain) does
        ranked = driver.ranked_words(state, min(top, len(vocab)))
        table = (topic_table(driver.topic_word(state), vocab, top) if ranked is None
                 else ranked_table(*ranked, vocab))
        if driver.traits.offers("features"):
            for t, feats in zip(table, driver.feature_table(state, features)):
                t["features"] = feats
        if annotate is not None:    # labels and representative documents (topic_listing)
            annotate(table)
        return format_topics(listed_table(driver, state, table), fmt)
    layers = list(range(1, depth + 1)) if layer is None else [layer]
    return format_layers(layer_tables(driver, state, vocab, top, layers), fmt)
