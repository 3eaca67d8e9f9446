"""The deep LDA state of a run grown by added documents (``train --continue RUN --add
STORE``, docs/train.md "Adding documents to a trained model"), for the mini-batch samplers
(TLASGR, TLFSGR, SGRLD for DLDA).

The added documents are streamed in: every layer's topics, r, the Fisher scales and the
persistent test chain (the test split is RUN's) go on; the update counter t, and so the step
sizes, go on; the next update starts a new epoch over the union (a fresh permutation, its keys
from the run's main stream). Only Phi^(1) (V, K_1) grows by the new words' rows:

* TLASGR, TLFSGR: a new word w takes phi_wk = eta / (M_k + V eta), its posterior mean under
  the Dirichlet(eta) prior with no count among the M_k expected tokens of topic k (the Fisher
  scale of eq. 18; TLFSGR's mean scale for every k), and the old rows are scaled down so that
  each column stays on the simplex;
* SGRLD for DLDA: the expanded means phi-hat^(1) take rows at eta, as SGRLD's do (their
  update's stationary mean without counts), and Phi^(1) is phi-hat^(1) normalised.

Batch upward-downward Gibbs (dlda-gibbs) keeps every training document's chain: the old ones
go on, the added ones start as a new run's do (theta^(l) = 1/K_l, c = 1). Its Phi^(1) is drawn
from its conditional after every upward pass, so the new words' rows only weigh the first
pass's allocation of their tokens: 1/V in every topic (M_k = 0 above), so that allocation
follows the document's theta alone.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from topictk.inference.minibatch import grown_epoch_state
from topictk.state.deep import DeepState


def grown_first_layer(phi: np.ndarray, n_words: int, eta: float,
                      scales: np.ndarray) -> np.ndarray:
    """Phi^(1) (V_old, K) with rows for words V_old..n_words - 1 at eta / (M_k + V eta), the
    old rows scaled so that every column sums to 1."""
    new = eta / (np.asarray(scales, dtype=np.float64) + n_words * eta)        # (K,)
    n_new = n_words - phi.shape[0]
    kept = phi * (1.0 - n_new * new)
    return np.ascontiguousarray(np.vstack([kept, np.tile(new, (n_new, 1))]))


def grow_deep_state(old: DeepState, first: np.ndarray, phi_hat: list[np.ndarray] | None = None,
                    schedule=None) -> DeepState:
    """``old`` with Phi^(1) = ``first`` (and the expanded means ``phi_hat``), no samples, and
    for a mini-batch ``schedule`` the epoch set for a new permutation of the union at the next
    update."""
    permutation = None if schedule is None else grown_epoch_state(schedule, old.step)
    return dataclasses.replace(old, phi=[first, *old.phi[1:]], phi_hat=phi_hat,
                               permutation=permutation, sample_steps=[])


def grow_training_chains(old: DeepState, n_docs: int, layers: list[int]) -> dict:
    """Batch Gibbs's local state of the union's ``n_docs`` training documents: the old
    documents' theta and c kept, the added documents' at the start of §8.5 (theta^(l) =
    1/K_l, c = 1)."""
    n_new = n_docs - old.theta_train.shape[0]
    theta = np.concatenate([np.full((n_new, k), 1.0 / k) for k in layers], axis=1)
    return {"theta_train": np.ascontiguousarray(np.vstack([old.theta_train, theta])),
            "c_train": np.ascontiguousarray(np.vstack([old.c_train,
                                                       np.ones((n_new, len(layers)))]))}
