"""Step-size schedules (docs/algorithms.md §12.1); t counts completed global updates from 0."""
from __future__ import annotations


def sgmcmc_step(a: float, b: float, c: float, t: int) -> float:
    """SG-MCMC step epsilon_t = a (1 + t / b)^(-c) (Patterson & Teh 2013, as in their code)."""
    return a * (1.0 + t / b) ** (-c)
