"""Random streams (docs/algorithms.md §12.3).

Every stream is ``PCG64(SeedSequence(entropy=seed, spawn_key=KEY))``. Persistent streams
(init ``(0,)``, main ``(1,)``, batch sampler ``(3, c)``) are created once, advance across steps
and are saved in checkpoints; derived streams (local ``(2, t, c)``, eval ``(4, e, c)``) are
re-created from their key whenever needed, so they need no saving; ``topictk infer`` uses
``(5, c)`` of the seed it is given; the left-to-right estimator of ``topictk evaluate``
(§11.3) uses the derived ``(6, c)``, the same for every sample; the word phase of a WarpLDA
sweep (§2.9) uses the persistent ``(7, c)``, one per word chunk; the word-intrusion tasks of
``topictk export --what intrusion`` draw from ``(8,)`` of their seed; the global draws of a
hierarchical Dirichlet process chain after every sweep (tables, weights, concentrations,
§2.15) from the persistent ``(9,)``; the documents added to a trained run (``train --continue
--add``) are folded in with the derived ``(10, 0, c)`` and their first topics drawn from
``(10, 1)``; the token draws of iteration t of a dynamic topic model (§14) use the derived
``(11, t, c)``, one per chunk of documents, and the noise of its topics' step the derived
``(12, t, s)``, one per time slice.
"""
from __future__ import annotations

import numpy as np

INIT = (0,)
MAIN = (1,)
#: prefix of the persistent streams of the word chunks of a WarpLDA sweep, ``(7, c)``
WARP_WORDS = (7,)
#: the draws of the word-intrusion tasks (intruders and the order shown)
INTRUSION = (8,)
#: the global draws of a hierarchical Dirichlet process chain (docs/algorithms.md §2.15)
HDP = (9,)


def local_key(t: int, chunk: int) -> tuple[int, ...]:
    return (2, t, chunk)


def sampler_key(chunk: int) -> tuple[int, ...]:
    return (3, chunk)


def eval_key(pass_index: int, chunk: int) -> tuple[int, ...]:
    return (4, pass_index, chunk)


def infer_key(chunk: int) -> tuple[int, ...]:
    return (5, chunk)


def left_to_right_key(chunk: int) -> tuple[int, ...]:
    return (6, chunk)


def grow_key(*parts: int) -> tuple[int, ...]:
    """The derived streams of documents added to a trained run: ``(10, 0, c)`` the fold-in of
    chunk c, ``(10, 1)`` the draw of their first topics, ``(10, 2, p)`` particle EM's start of
    particle p for them."""
    return (10, *parts)


def dtm_key(t: int, chunk: int) -> tuple[int, ...]:
    """The token draws of a dynamic topic model's iteration ``t``, chunk ``chunk``."""
    return (11, t, chunk)


def dtm_noise_key(t: int, time_slice: int) -> tuple[int, ...]:
    """The normals of a dynamic topic model's topics in iteration ``t``, slice
    ``time_slice``."""
    return (12, t, time_slice)


def make_stream(seed: int, key: tuple[int, ...]) -> np.random.PCG64:
    return np.random.PCG64(np.random.SeedSequence(entropy=seed, spawn_key=key))


def from_states(states: list[dict]) -> list[np.random.PCG64]:
    """Bit generators in the states ``states`` (``bg.state`` of each): streams as a task on
    another process carries them, to go on where they were."""
    streams = []
    for state in states:
        bg = np.random.PCG64()
        bg.state = state
        streams.append(bg)
    return streams


class Streams:
    """The seed's persistent streams, keyed by tuples, with their states for checkpoints."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self._persistent: dict[tuple[int, ...], np.random.PCG64] = {}

    def persistent(self, key: tuple[int, ...]) -> np.random.PCG64:
        key = tuple(int(k) for k in key)
        if key not in self._persistent:
            self._persistent[key] = make_stream(self.seed, key)
        return self._persistent[key]

    def derived(self, key: tuple[int, ...]) -> np.random.PCG64:
        return make_stream(self.seed, tuple(int(k) for k in key))

    def chunk_streams(self, prefix: tuple[int, ...], n_chunks: int,
                      persistent: bool) -> list[np.random.PCG64]:
        get = self.persistent if persistent else self.derived
        return [get(prefix + (c,)) for c in range(n_chunks)]

    def state(self) -> dict:
        """JSON-serialisable states of every persistent stream."""
        return {"seed": self.seed,
                "streams": [[list(key), bg.state] for key, bg in sorted(self._persistent.items())]}

    def restore(self, data: dict) -> None:
        """Put every persistent stream back to its state in ``data`` (of :meth:`state`); a
        stream opened since is forgotten, to start afresh when asked for again."""
        saved = {tuple(key): state for key, state in data["streams"]}
        for key in list(self._persistent):
            if key in saved:
                self._persistent[key].state = saved[key]
            else:
                del self._persistent[key]

    @classmethod
    def from_state(cls, data: dict) -> "Streams":
        streams = cls(data["seed"])
        for key, state in data["streams"]:
            bg = streams.persistent(tuple(key))
            state = dict(state)
            state["state"] = {k: int(v) for k, v in state["state"].items()}
            bg.state = state
        return streams
