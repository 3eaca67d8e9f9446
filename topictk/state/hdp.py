"""The state of a hierarchical Dirichlet process chain, weak-limit direct assignment
(docs/algorithms.md §2.15)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topictk.state.counts import CountState, WarpState
from topictk.state.schema import Array, Value

#: what an HDP chain saves beside its counts, in either order of sweeping: the global weights,
#: the table counts m_.k and the two concentrations
GLOBALS = {"pi": Array("float64", ("K",)), "tables": Array("int64", ("K",)),
           "concentration": Value(float), "gamma": Value(float)}


@dataclass
class HDPState(CountState):
    """A Gibbs chain's counts over K_max topic slots, and the global weights it samples with:
    ``alpha`` (the document prior the sweep reads) is always ``concentration * pi``.

    pi            (K,) float64  global topic weights, on the simplex
    tables        (K,) int64    m_.k, the tables of each topic drawn after the last sweep
    concentration float         alpha_0, the document-level concentration
    gamma         float         the top-level concentration
    """

    SCHEMA_VERSION = 1
    SCHEMA = {**CountState.SCHEMA, **GLOBALS}

    pi: np.ndarray | None = None
    tables: np.ndarray | None = None
    concentration: float = 1.0
    gamma: float = 1.0


@dataclass
class HDPWarpState(WarpState):
    """An HDP chain swept in WarpLDA's order: z and n_k (:class:`WarpState`) with the global
    weights of :class:`HDPState`."""

    SCHEMA_VERSION = 1
    SCHEMA = {**WarpState.SCHEMA, **GLOBALS}

    pi: np.ndarray | None = None
    tables: np.ndarray | None = None
    concentration: float = 1.0
    gamma: float = 1.0
