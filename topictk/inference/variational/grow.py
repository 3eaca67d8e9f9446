"""The variational states of a run grown by added documents (``train --continue RUN --add
STORE``, docs/train.md "Adding documents to a trained model").

Both start the added documents from the run's topics, deterministically (no draw): batch VB
keeps lambda and gives the new words' rows the prior eta (``model.beta``: what lambda is
without a count), and starts gamma of the added documents as its first E-step does (alpha +
N_d / K); unsmoothed VB keeps phi, a point estimate with no prior to give a new word, so its
union has no new words (their tokens dropped from the added documents, reported by ``train``)
and only gamma grows. Particle EM is unsmoothed too: phi and alpha are kept, every particle's
gamma of the old documents goes on, and the added documents start as a new run starts each
particle (§10.4): particle 0 at alpha + N_d / K, particle p >= 1 perturbed by Gam(1, 1) draws
from the growth's own stream ``grow_key(2, p)`` (p counted from ``particle_offset``, so a
particle starts the same whatever P is); their weights omega are uniform until the next
E-step. CVB and CVB0 keep mu of the old pairs and start each added pair at the run's
posterior of the word's topic, mu_k proportional to alpha_k (m_kw + beta) / (m_k + V beta),
then count every field again from mu. The EM stopping rule starts afresh: the added documents
move the bound. Online VB and HSVG stream the added documents in: lambda's new rows start at
the prior (lam_tilde 0, so lambda = the offset, eta), the update counter t and so the step
sizes go on, and the next update starts a new epoch, a fresh permutation of the whole union,
so the added documents come mixed among the old ones (the epoch RUN was in is cut short).
"""
from __future__ import annotations

import numpy as np

from topictk.inference.base import AddedDocuments
from topictk.corpus.batches import FEISTEL_ROUNDS
from topictk.state.variational import CVBState, OnlineState, VBState
from topictk.streams import grow_key


def _new_rows(old: np.ndarray, n_rows: int, value: float) -> np.ndarray:
    """``old`` (R, K) followed by ``n_rows - R`` rows of ``value``."""
    extra = np.full((n_rows - old.shape[0], old.shape[1]), value, dtype=np.float64)
    return np.ascontiguousarray(np.vstack([old, extra]))


def _same_words(driver, rows: int) -> None:
    """A family without a prior on its topics runs on a union without new words."""
    if driver.V != rows:
        raise ValueError(f"the union has {driver.V} words, the run's topics {rows}: new words "
                         f"must be dropped for a family whose topics have no prior")


def grow_vb_state(driver, old: VBState, added: AddedDocuments) -> VBState:
    """Batch VB (smoothed: the new words' lambda rows are eta; unsmoothed: phi kept, the union
    has no new words)."""
    if not old.smoothed:
        _same_words(driver, old.lam.shape[0])
    alpha = np.array(old.alpha, dtype=np.float64)
    lengths = np.asarray(driver.doc_lengths[added.n_docs:], dtype=np.float64)
    gamma = np.vstack([old.gamma, alpha[None, :] + (lengths / driver.K)[:, None]])
    return VBState(lam=_new_rows(old.lam, driver.V, old.beta),
                   gamma=np.ascontiguousarray(gamma), alpha=alpha, beta=float(old.beta),
                   smoothed=bool(old.smoothed), step=int(old.step))


def grow_pem_state(driver, old, added: AddedDocuments):
    """Particle EM (module docstring): phi, alpha, the old documents' gamma and omega kept;
    the added documents' gamma of particle p as the driver's ``particle_start``, its draws
    from ``grow_key(2, p)``; the bounds and the stopping rule start afresh."""
    _same_words(driver, old.phi.shape[0])
    alpha = np.array(old.alpha, dtype=np.float64)
    lengths = driver.doc_lengths[added.n_docs:]
    offset = int(driver.config.inference.particle_offset)
    P = old.gamma.shape[0]
    gamma = np.empty((P, driver.n_docs, driver.K))
    gamma[:, :added.n_docs] = old.gamma
    for p in range(P):
        start = offset + p
        gamma[p, added.n_docs:] = driver.particle_start(
            start, alpha, lengths, added.streams.derived(grow_key(2, start)))
    omega = np.vstack([old.omega, np.full((lengths.size, P), 1.0 / P)])
    return type(old)(phi=np.array(old.phi, dtype=np.float64), gamma=gamma, alpha=alpha,
                     omega=np.ascontiguousarray(omega), particle_bounds=np.full(P, np.nan),
                     step=int(old.step))


def grow_cvb_state(driver, old: CVBState, added: AddedDocuments) -> CVBState:
    """CVB and CVB0: mu of the added pairs from the run's topics, the fields counted again."""
    K, V = driver.K, driver.V
    m_kw = _new_rows(old.m_kw, V, 0.0)
    phi = (m_kw + old.beta) / (old.m_k + V * old.beta)                    # (V, K)
    new_pairs = np.asarray(driver.indices[old.mu.shape[0]:], dtype=np.int64)
    mu_new = phi[new_pairs] * old.alpha
    mu_new /= mu_new.sum(axis=1, keepdims=True)
    D = driver.n_docs
    gaussian = driver.gaussian
    state = CVBState(mu=np.ascontiguousarray(np.vstack([old.mu, mu_new])),
                     m_dk=np.zeros((D, K)), m_kw=np.zeros((V, K)), m_k=np.zeros(K),
                     v_dk=np.zeros((D, K)) if gaussian else None,
                     v_kw=np.zeros((V, K)) if gaussian else None,
                     v_k=np.zeros(K) if gaussian else None,
                     alpha=np.array(old.alpha, dtype=np.float64), beta=float(old.beta),
                     gaussian=gaussian, step=int(old.step))
    driver.refresh_fields(state)
    if not gaussian:
        state.v_dk, state.v_kw, state.v_k = (np.zeros((0, K)), np.zeros((0, K)), np.zeros(0))
    return state


def grow_online_state(driver, old: OnlineState, added: AddedDocuments) -> OnlineState:
    """Online VB and HSVG: lam_tilde's new rows 0 (lambda at the offset, eta), the counter,
    scale, offset and priors kept; the epoch is set just before the one of update ``step``
    on the union, so that update draws a new permutation of the union (its keys from the
    run's main stream)."""
    epoch = int(old.step) // driver.batches_per_epoch
    return OnlineState(lam_tilde=_new_rows(old.lam_tilde, driver.V, 0.0),
                       lam_sum=np.array(old.lam_sum, dtype=np.float64), scale=float(old.scale),
                       offset=float(old.offset), alpha=np.array(old.alpha, dtype=np.float64),
                       beta=float(old.beta), keys=np.zeros(FEISTEL_ROUNDS, dtype=np.uint64),
                       epoch=epoch - 1, rho=float(old.rho), step=int(old.step))
