"""The SGRLD state of a run grown by added documents (``train --continue RUN --add STORE``,
docs/train.md "Adding documents to a trained model").

The added documents are streamed in: phi_hat keeps its rows, and a new word's row starts at
beta, the mean its update's stationary Gamma(beta, 1) has while no document holds the word;
the update counter t, and so the step sizes epsilon_t, go on; the next update starts a new
epoch over the union (a fresh permutation, its keys from the run's main stream), so the added
documents come mixed among the old ones. The continued run takes its posterior samples over
its own updates (``continued_settings``: ``burn_in`` = RUN's step).
"""
from __future__ import annotations

import numpy as np

from topictk.inference.base import AddedDocuments
from topictk.inference.minibatch import grown_epoch_state
from topictk.state.simplex import SimplexState


def grow_simplex_state(driver, old: SimplexState, added: AddedDocuments) -> SimplexState:
    """phi_hat with the new words' rows at beta, alpha, beta, the counter and the floor count
    kept, and the epoch set just before the one of update ``step`` on the union."""
    extra = np.full((driver.V - old.phi_hat.shape[0], old.phi_hat.shape[1]), float(old.beta))
    return SimplexState(phi_hat=np.ascontiguousarray(np.vstack([old.phi_hat, extra])),
                        alpha=np.array(old.alpha, dtype=np.float64), beta=float(old.beta),
                        step=int(old.step),
                        permutation=grown_epoch_state(driver.schedule, old.step),
                        floored=int(old.floored))
