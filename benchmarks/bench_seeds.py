"""Seed words on 20 Newsgroups (bydate store, K = 20): do seeded topics find their groups,
and do the seeds hold?

Seed lists, rule A: the tokens of the group's name that are in the vocabulary, without the
hierarchy prefixes (alt, comp, rec, sci, soc, talk, misc) and the tokens shared by several
groups (sys, os, ms, religion, politics, mac, pc, ibm, hardware, sport), then the most obvious
words of the group up to 3-4 words. Rule B, to check that the method is not tuned to A: 3 other
obvious words per group, none of them in A. Rule C, a third list in neither A nor B: 3 words
per group that name things only that group talks about (products, teams, parts, groups of
people), none a word every group uses (people, law, game, power, window) or one that two
groups share (jews, christians), which B has.

Measured: accuracy = share of test documents whose argmax folded-in theta (topictk's Gibbs
fold-in, 50 sweeps, 25 burn-in) is the seeded topic of their group; unseeded LDA under the best
relabelling (scipy's linear_sum_assignment); share of seed words in their topic's top 10
after 1,000 sweeps, prior against init-only seeding; seed_weight 1, 3, 10, 30, 100 measured
to choose the default (10).
tokens/s: ``--timing`` (a quiet machine), seeded against unseeded per sampler, one thread.

``--peers``: tomotopy's word-prior LDA beside them (the setup of the seeded-topics claims:
``set_word_prior(word, [1.0 on the group's topic, 0.001 elsewhere])``), K = 20, alpha 0.1, eta
0.01, one thread, seed 1, ``--sweeps`` sweeps (``train(iter)`` counts sweeps), on the store's
training tokens (one ``add_doc`` per training document with the store's word strings, nothing
dropped, as bench_gibbs.py); its normalised topic-word distributions over the store's vocabulary
are folded in by topictk's Gibbs fold-in with the settings, seed and blocks of
:func:`test_theta` (:func:`phi_theta`), and scored by the same rule.

    python benchmarks/bench_seeds.py [--sweeps 500] [--timing] [--peers]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

import harness as h
import topictk

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "benchmarks" / "work" / "seeds"
OUT = REPO / "benchmarks" / "results" / "seeds.md"

SEEDS_A = {
    "alt.atheism": ["atheism", "atheists", "god"],
    "comp.graphics": ["graphics", "image", "polygon"],
    "comp.os.ms-windows.misc": ["windows", "dos", "win"],
    "comp.sys.ibm.pc.hardware": ["ide", "scsi", "motherboard"],
    "comp.sys.mac.hardware": ["apple", "quadra", "powerbook"],
    "comp.windows.x": ["xterm", "motif", "widget"],
    "misc.forsale": ["forsale", "sale", "shipping", "offer"],
    "rec.autos": ["autos", "car", "engine"],
    "rec.motorcycles": ["motorcycles", "bike", "dod"],
    "rec.sport.baseball": ["baseball", "pitcher", "hitter"],
    "rec.sport.hockey": ["hockey", "nhl", "puck"],
    "sci.crypt": ["crypt", "encryption", "clipper", "key"],
    "sci.electronics": ["electronics", "circuit", "voltage"],
    "sci.med": ["med", "doctor", "patients", "disease"],
    "sci.space": ["space", "nasa", "orbit"],
    "soc.religion.christian": ["christian", "church", "christ"],
    "talk.politics.guns": ["guns", "firearms", "weapons"],
    "talk.politics.mideast": ["mideast", "israel", "armenians", "arab"],
    "talk.politics.misc": ["clinton", "tax", "government"],
    "talk.religion.misc": ["jesus", "bible", "morality"],
}
SEEDS_B = {
    "alt.atheism": ["atheist", "religion", "belief"],
    "comp.graphics": ["3d", "jpeg", "rendering"],
    "comp.os.ms-windows.misc": ["microsoft", "ini", "driver"],
    "comp.sys.ibm.pc.hardware": ["bios", "isa", "controller"],
    "comp.sys.mac.hardware": ["mac", "lc", "centris"],
    "comp.windows.x": ["x11", "server", "window"],
    "misc.forsale": ["price", "condition", "asking"],
    "rec.autos": ["cars", "dealer", "ford"],
    "rec.motorcycles": ["ride", "riding", "helmet"],
    "rec.sport.baseball": ["game", "season", "players"],
    "rec.sport.hockey": ["team", "playoffs", "goal"],
    "sci.crypt": ["nsa", "privacy", "keys"],
    "sci.electronics": ["power", "amp", "wire"],
    "sci.med": ["medical", "treatment", "health"],
    "sci.space": ["launch", "moon", "shuttle"],
    "soc.religion.christian": ["faith", "sin", "scripture"],
    "talk.politics.guns": ["gun", "fbi", "batf"],
    "talk.politics.mideast": ["israeli", "jews", "turkish"],
    "talk.politics.misc": ["president", "people", "law"],
    "talk.religion.misc": ["koresh", "objective", "christians"],
}
SEEDS_C = {
    "alt.atheism": ["existence", "theism", "evidence"],
    "comp.graphics": ["tiff", "gif", "bitmap"],
    "comp.os.ms-windows.misc": ["exe", "font", "printer"],
    "comp.sys.ibm.pc.hardware": ["drives", "jumper", "floppy"],
    "comp.sys.mac.hardware": ["macintosh", "simm", "iisi"],
    "comp.windows.x": ["xlib", "openwindows", "colormap"],
    "misc.forsale": ["obo", "sell", "brand"],
    "rec.autos": ["toyota", "honda", "tires"],
    "rec.motorcycles": ["bmw", "harley", "rider"],
    "rec.sport.baseball": ["braves", "pitching", "innings"],
    "rec.sport.hockey": ["leafs", "penguins", "bruins"],
    "sci.crypt": ["pgp", "wiretap", "escrow"],
    "sci.electronics": ["resistor", "capacitor", "amplifier"],
    "sci.med": ["cancer", "symptoms", "medicine"],
    "sci.space": ["spacecraft", "satellite", "lunar"],
    "soc.religion.christian": ["prayer", "holy", "catholic"],
    "talk.politics.guns": ["handgun", "nra", "rifle"],
    "talk.politics.mideast": ["palestinian", "arabs", "turks"],
    "talk.politics.misc": ["taxes", "congress", "gay"],
    "talk.religion.misc": ["davidians", "waco", "cult"],
}


WEIGHTS = (3.0, 30.0, 100.0)     # beside the default (model.seed_weight: 10)


def config(store: Path, out: Path, sweeps: int, seeds: dict | None, **model) -> Path:
    data = {"corpus": str(store), "output": str(out),
            "model": {"topics": 20, "alpha": 0.1, "beta": 0.01, **model},
            "inference": {"algorithm": "gibbs", "iterations": sweeps, "sampler": "sparse"},
            "training": {"seed": 1, "eval_every": 0, "checkpoint_every": 500,
                         "keep_checkpoints": 5, "threads": 1}}
    if seeds is not None:
        data["model"]["seed_words"] = {g: list(w) for g, w in seeds.items()}
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def train(store, name, sweeps, seeds=None, **model) -> Path:
    out = WORK / name
    if (out / "model.npz").exists():
        return out
    path = config(store, out, sweeps, seeds, **model)
    subprocess.run([sys.executable, "-m", "topictk", "train", "-c", str(path), "-q",
                    "--force"], check=True)
    return out


def test_theta(run: Path, checkpoint: int | None) -> np.ndarray:
    """theta of the test documents' observed parts under the run (or its ``checkpoint``):
    the Gibbs fold-in of ``Run.doc_topic``, 50 sweeps (25 burn-in), seed 0, one thread."""
    return topictk.load_run(run, checkpoint).doc_topic(split="test", sweeps=50, burn_in=25,
                                                       seed=0, threads=1)


def phi_theta(store, phi: np.ndarray, alpha: float = 0.1, sweeps: int = 50, burn_in: int = 25,
              seed: int = 0) -> np.ndarray:
    """The test theta of :func:`test_theta` for topics (K, V) from anywhere
    (``topictk.fold_in``: the same blocks, streams and seed as a Gibbs run's fold-in)."""
    return topictk.fold_in(store, phi, alpha, split="test", sweeps=sweeps, burn_in=burn_in,
                           seed=seed, threads=1)


def lookup(word: str, index: dict[str, int]) -> int | None:
    """A seed word's id as topictk finds it (docs/seeds.md): as written, else lower-cased."""
    found = index.get(word)
    return index.get(word.lower()) if found is None else found


def tomotopy_phi(store_path: Path, name: str, seeds: dict, sweeps: int) -> np.ndarray:
    """tomotopy.LDAModel with set_word_prior (1.0 on the seed word's topic, 0.001 on the
    others) trained ``sweeps`` sweeps on the store's training documents, one thread, seed 1:
    its normalised topic-word distributions (K, V) in the store's word ids, kept in WORK."""
    cached = WORK / f"{name}.npz"
    if cached.exists():
        return np.load(cached)["phi"]
    import tomotopy as tp

    store = topictk.open_store(store_path)
    train_docs = store.train()
    vocab, V, K = list(store.vocab), store.n_words, 20
    doc_ptr, words = np.asarray(train_docs.doc_ptr), np.asarray(train_docs.words)
    mdl = tp.LDAModel(tw=tp.TermWeight.ONE, min_cf=0, min_df=0, rm_top=0, k=K, alpha=0.1,
                      eta=0.01, seed=1)
    mdl.optim_interval = 0
    mdl.burn_in = 0
    for d in range(doc_ptr.size - 1):
        mdl.add_doc([vocab[w] for w in words[doc_ptr[d]:doc_ptr[d + 1]]])
    index = {w: i for i, w in enumerate(vocab)}
    for k, group in enumerate(seeds.values()):
        for word in group:
            found = lookup(word, index)
            if found is not None:           # words the store lacks are left out, as topictk
                mdl.set_word_prior(vocab[found], [1.0 if j == k else 0.001 for j in range(K)])
    mdl.train(0, workers=1)
    mdl.train(sweeps, workers=1)
    used = np.array([index[w] for w in mdl.used_vocabs], dtype=np.int64)
    if mdl.num_words != words.size or used.size != np.count_nonzero(np.bincount(words,
                                                                                  minlength=V)):
        raise SystemExit(f"tomotopy dropped tokens: {mdl.num_words} of {words.size}")
    phi = np.zeros((K, V))
    phi[:, used] = np.array([mdl.get_topic_word_dist(k) for k in range(K)])
    np.savez(cached, phi=phi)
    return phi


def phi_in_top(phi: np.ndarray, vocab, seeds: dict, top: int = 10) -> tuple[int, int]:
    """Seed words (in the vocabulary) among their topic's ``top`` most probable words."""
    index = {w: i for i, w in enumerate(vocab)}
    ids = [(k, lookup(w, index)) for k, g in enumerate(seeds.values()) for w in g]
    ids = [(k, i) for k, i in ids if i is not None]
    return sum(int((phi[k] > phi[k, i]).sum()) < top for k, i in ids), len(ids)


def groups(store: Path) -> tuple[np.ndarray, list[str]]:
    meta = topictk.open_store(store).metadata("test")
    names = sorted(SEEDS_A)
    return np.array([names.index(m["group"]) for m in meta]), names


def accuracy(theta, truth, order) -> float:
    """Share whose argmax topic is the seeded topic of their group: topic i seeds group
    order[i], and ``truth`` holds indices into ``order``."""
    assert list(SEEDS_A) == list(SEEDS_B) == list(SEEDS_C) == list(order)
    return float((theta.argmax(axis=1) == truth).mean())


def relabelled(theta, truth) -> float:
    from scipy.optimize import linear_sum_assignment
    K = theta.shape[1]
    table = np.zeros((K, K))
    np.add.at(table, (theta.argmax(axis=1), truth), 1)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / truth.size)


def in_top(run: Path, top: int = 10) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-m", "topictk", "topics", str(run), "--seeds",
                          "--format", "json", "--top", str(top)], check=True,
                         capture_output=True, text=True).stdout
    rows = [w for t in json.loads(out)["seeds"] for w in t["words"] if not w.get("missing")]
    return sum(w["rank"] <= top for w in rows), len(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweeps", type=int, default=500)
    parser.add_argument("--hold", type=int, default=1000)
    parser.add_argument("--timing", action="store_true",
                        help="only tokens/s, seeded against unseeded, per sampler")
    parser.add_argument("--peers", action="store_true",
                        help="also tomotopy's word-prior LDA (set_word_prior), lists A and B")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    store = h.ensure_20news_bydate()
    if args.timing:
        return timing(store)
    truth, names = groups(store)
    lines, rows = [], []

    def record(name, value):
        rows.append((name, value))
        print(name, value, flush=True)

    S, H = args.sweeps, args.hold
    t0 = time.time()
    run = train(store, "unseeded", S)
    record(f"unseeded LDA, best relabelling, {S} sweeps", relabelled(test_theta(run, None), truth))
    run = train(store, "prior-A", H, SEEDS_A)
    record(f"seeded (A, default weight), {S} sweeps", accuracy(test_theta(run, S), truth, names))
    record(f"seeded (A, default weight), {H} sweeps", accuracy(test_theta(run, None), truth, names))
    record(f"seeds in top 10, prior (A), {H} sweeps", in_top(run))
    run = train(store, "init-A", H, SEEDS_A, seed_mode="init")
    record(f"seeds in top 10, init only (A), {H} sweeps", in_top(run))
    record(f"init-only accuracy (A), {H} sweeps", accuracy(test_theta(run, None), truth, names))
    run = train(store, "prior-B", S, SEEDS_B)
    record(f"seeded (B, default weight), {S} sweeps", accuracy(test_theta(run, None), truth, names))
    record(f"seeds in top 10, prior (B), {S} sweeps", in_top(run))
    run = train(store, "prior-C", S, SEEDS_C)
    record(f"seeded (C, default weight), {S} sweeps", accuracy(test_theta(run, None), truth, names))
    record(f"seeds in top 10, prior (C), {S} sweeps", in_top(run))
    for w in WEIGHTS:
        run = train(store, f"prior-A-w{w}", S, SEEDS_A, seed_weight=w)
        record(f"seeded (A, weight {w}), {S} sweeps",
               accuracy(test_theta(run, None), truth, names))
        record(f"seeds in top 10, prior (A, weight {w}), {S} sweeps", in_top(run))
    if args.peers:
        opened = topictk.open_store(store)
        for tag, seeds in (("A", SEEDS_A), ("B", SEEDS_B), ("C", SEEDS_C)):
            phi = tomotopy_phi(store, f"tomotopy-{tag}-{S}", seeds, S)
            record(f"tomotopy set_word_prior ({tag}), {S} sweeps",
                   accuracy(phi_theta(opened, phi), truth, names))
            record(f"seeds in top 10, tomotopy ({tag}), {S} sweeps",
                   phi_in_top(phi, opened.vocab, seeds))
    lines = ["# Seed words on 20 Newsgroups (K = 20)", "",
             f"bydate store, {len(truth)} test documents, SparseLDA one thread, alpha 0.1, "
             f"beta 0.01, training seed 1; fold-in 50 sweeps (25 burn-in). Wall time "
             f"{time.time() - t0:.0f} s for this invocation (runs already in "
             "benchmarks/work/seeds are reused). Seed lists and rules: "
             "benchmarks/bench_seeds.py.", "",
             "| measure | value |", "| --- | --- |"]
    for name, value in rows:
        text = (f"{value[0]} of {value[1]}" if isinstance(value, tuple) else f"{100 * value:.1f} %")
        lines.append(f"| {name} | {text} |")
    OUT.write_text("\n".join(lines) + "\n" + notes())


def notes() -> str:
    """What follows the measures' table in the results file (hand-written notes, the tokens/s
    table of ``--timing``), kept when the table is rewritten."""
    if not OUT.exists():
        return ""
    text = OUT.read_text().split("\n")
    end = next((i for i, line in enumerate(text) if line.startswith("| measure")), len(text))
    while end < len(text) and text[end].startswith("|"):
        end += 1
    rest = "\n".join(text[end:]).strip("\n")
    return "\n" + rest + "\n" if rest else ""


def timing(store: Path, sweeps: int = 100, rounds: int = 2) -> None:
    """tokens/s of 100 sweeps, seeded (A) and unseeded side by side for each sampler, one
    thread, alternated ``rounds`` times; the best of each."""
    from topictk.api import load_run
    lines = ["", "## tokens/s, one thread (100 sweeps, best of 2, alternated)", "",
             "| sampler | unseeded | seeded | ratio |", "| --- | --- | --- | --- |"]
    for sampler in ("dense", "sparse", "warp", "mh"):
        best = {}
        for r in range(rounds):
            for seeded in (False, True):
                name = f"time-{sampler}-{'s' if seeded else 'u'}-{r}"
                out = WORK / name
                path = config(store, out, sweeps, SEEDS_A if seeded else None)
                data = yaml.safe_load(path.read_text())
                data["inference"]["sampler"] = sampler
                if sampler in ("warp", "mh"):
                    data["inference"]["chunks"] = 1
                path.write_text(yaml.safe_dump(data, sort_keys=False))
                subprocess.run([sys.executable, "-m", "topictk", "train", "-c", str(path),
                                "-q", "--force"], check=True)
                run = load_run(out)
                rate = run.tokens_seen / run.train_seconds
                best[seeded] = max(best.get(seeded, 0.0), rate)
        lines.append(f"| {sampler} | {best[False] / 1e6:.2f} M | {best[True] / 1e6:.2f} M | "
                     f"{best[True] / best[False]:.3f} |")
        print(lines[-1], flush=True)
    with OUT.open("a") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
