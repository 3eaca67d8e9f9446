"""The hierarchical Dirichlet process topic model (Teh, Jordan, Beal & Blei 2006) as a count
representation of the Gibbs driver: ``model.family: hdp`` with ``inference.algorithm: gibbs``
(docs/algorithms.md §2.15).

Weak-limit direct assignment (Fox et al. 2011): K_max topic slots (``model.topics``, resolved
from ``model.max_topics``), global weights pi ~ Dir(gamma / K_max, ..., gamma / K_max), and
every document's theta_d ~ Dir(alpha_0 pi). The document prior alpha_0 pi is the per-topic
prior the SparseLDA, dense, Metropolis-Hastings and WarpLDA kernels already take, so z is swept
by the one ``inference.sampler`` picks, unchanged (:class:`HDPCounts`, :class:`HDPMHCounts`,
:class:`HDPWarpCounts`); after every sweep (the driver's ``global_draws``, which brings z and
n_dk back first when the sweep ran on a Dask cluster), from one persistent stream
(``topictk.streams.HDP``):

0. ``model.split_merge`` split-merge moves on (z, pi) (:meth:`HDPChain.split_merge_move`),
   which let the chain forget its start,
1. the tables m_dk ~ CRT(n_dk, alpha_0 pi_k) (:func:`crt_tables`),
2. pi ~ Dir(gamma / K_max + m_.k) (:func:`draw_weights`),
3. alpha_0 and gamma by the auxiliary-variable method of Escobar & West (1995) and Teh et al.
   (2006, appendix A) (:func:`resample_alpha0`, :func:`resample_gamma`),

and the state's alpha becomes alpha_0 pi. Every draw happens in the main thread in a fixed
order, so the numbers depend on neither threads nor where the run stopped.
"""
from __future__ import annotations

import logging

import numpy as np

from topictk import streams as keys
from topictk._cy.special import gammaln
from topictk.config.schema import initial_hdp_topics
from topictk.inference.gibbs import _hdp, _warp
from topictk.inference.base import word_frequencies
from topictk.inference.gibbs.counts import SparseLDACounts
from topictk.inference.gibbs.mh import MHCounts
from topictk.inference.gibbs.warp import WarpCounts
from topictk.inference.seeds import setting
from topictk.state.hdp import HDPState, HDPWarpState

log = logging.getLogger("topictk")

#: Gamma (shape, rate) priors of the concentrations: Teh et al. (2006) §7.1, alpha_0 ~
#: Gamma(1, 1) and gamma ~ Gamma(1, 0.1)
ALPHA_PRIOR = (1.0, 1.0)
GAMMA_PRIOR = (1.0, 0.1)
#: the start of gamma (its prior's mean is 10; 1 starts the weights less even)
GAMMA_START = 1.0
#: the smallest weight of a topic slot: a Dirichlet draw with shapes gamma / K_max far below 1
#: underflows to 0, and a zero prior would shut the slot for good (and make ln Gamma(0))
PI_FLOOR = 1e-250
#: live topics in this share of the K_max slots or more: the truncation binds (the weak limit
#: approximates the HDP while K_max is well above the topics the data ask for, Fox et al.
#: 2011), which a warning says once per run
BINDING_SHARE = 0.9
#: model.split_merge: split-merge attempts after every sweep
SPLIT_MERGE = 1
#: pseudo-counts of the proposal of a split's share of the weights, Beta(1 + c n_A / n,
#: 1 + c n_B / n): the two sides' token shares, loosely
SHARE_COUNTS = 10.0
#: documents per block of the table draw (bounds its temporaries at a block's tokens)
CRT_BLOCK = 4096


def crt_tables(ndk: np.ndarray, weight: np.ndarray, generator: np.random.Generator,
               doc_ptr: np.ndarray | None = None) -> np.ndarray:
    """m_.k, the tables of every topic summed over documents: m_dk = sum_{i < n_dk}
    Bernoulli(a_k / (a_k + i)) with a_k = ``weight[k]`` (the Chinese restaurant table
    distribution), one uniform per (d, k, i) in row-major (d, k) order and i ascending, drawn
    from ``generator`` in blocks of CRT_BLOCK documents (kernel
    :func:`topictk.inference.gibbs._hdp.crt_dense_block`). ``doc_ptr`` (D + 1), when given,
    counts a block's customers (its documents' tokens, which its rows of n_dk sum to) without
    reading the rows twice. Returns (K,) int64."""
    weight = np.ascontiguousarray(weight, dtype=np.float64)
    tables = np.zeros(weight.size, dtype=np.int64)
    n_docs = ndk.shape[0]
    for begin in range(0, n_docs, CRT_BLOCK):
        rows = np.ascontiguousarray(ndk[begin:begin + CRT_BLOCK], dtype=np.int32)
        customers = (int(rows.sum(dtype=np.int64)) if doc_ptr is None else
                     int(doc_ptr[min(begin + CRT_BLOCK, n_docs)] - doc_ptr[begin]))
        if customers:
            _hdp.crt_dense_block(rows, weight, generator.random(customers), tables)
    return tables


def crt_tables_of_rows(ptr: np.ndarray, topic: np.ndarray, count: np.ndarray,
                       weight: np.ndarray, generator: np.random.Generator) -> np.ndarray:
    """:func:`crt_tables` from the non-zero n_dk as CSR rows (``ptr`` (D + 1), ``topic`` and
    ``count``, topics ascending in a row): the same entries in the same order, so the same
    tables from the same stream, without a (D, K) array."""
    weight = np.ascontiguousarray(weight, dtype=np.float64)
    topic = np.ascontiguousarray(topic, dtype=np.int32)
    count = np.ascontiguousarray(count, dtype=np.int32)
    tables = np.zeros(weight.size, dtype=np.int64)
    n_docs = ptr.size - 1
    for begin in range(0, n_docs, CRT_BLOCK):
        a, b = int(ptr[begin]), int(ptr[min(begin + CRT_BLOCK, n_docs)])
        customers = int(count[a:b].sum(dtype=np.int64))
        if customers:
            _hdp.crt_rows_block(topic[a:b], count[a:b], weight, generator.random(customers),
                                tables)
    return tables


def draw_weights(tables: np.ndarray, gamma: float, generator: np.random.Generator
                 ) -> np.ndarray:
    """pi ~ Dir(gamma / K + m_.k), from Gamma draws in log space (g = Gamma(a + 1) U^(1/a)
    has the law of Gamma(a), without underflow for a << 1), floored at PI_FLOOR and
    renormalised. K Gamma draws, then K uniforms."""
    shape = gamma / tables.size + tables
    log_g = np.log(generator.standard_gamma(shape + 1.0))
    log_g += np.log(generator.random(tables.size)) / shape
    log_g -= log_g.max()
    pi = np.exp(log_g)
    pi /= pi.sum()
    np.maximum(pi, PI_FLOOR, out=pi)
    return pi / pi.sum()


def resample_alpha0(alpha0: float, lengths: np.ndarray, total_tables: int,
                    prior: tuple[float, float], generator: np.random.Generator) -> float:
    """alpha_0 | m by Teh et al. (2006) appendix A: w_d ~ Beta(alpha_0 + 1, N_d), s_d ~
    Bernoulli(N_d / (N_d + alpha_0)) for every document with tokens, then alpha_0 ~
    Gamma(a + m.. - sum s, rate b - sum ln w)."""
    a, b = prior
    n = lengths[lengths > 0].astype(np.float64)
    w = generator.beta(alpha0 + 1.0, n)
    s = generator.random(n.size) < n / (n + alpha0)
    return float(generator.gamma(a + total_tables - s.sum(), 1.0 / (b - np.log(w).sum())))


def resample_gamma(gamma: float, live: int, total_tables: int, prior: tuple[float, float],
                   generator: np.random.Generator) -> float:
    """gamma | K-bar topics with tables among m.. tables (Escobar & West 1995, as Teh et al.
    2006 and, in the weak limit, Fox et al. 2011): eta ~ Beta(gamma + 1, m..), then gamma from
    the mixture of Gamma(a + K-bar, b - ln eta) and Gamma(a + K-bar - 1, b - ln eta) with odds
    (a + K-bar - 1) / (m.. (b - ln eta))."""
    a, b = prior
    if total_tables == 0:
        return float(generator.gamma(a, 1.0 / b))
    eta = generator.beta(gamma + 1.0, total_tables)
    rate = b - np.log(eta)
    odds = (a + live - 1.0) / (total_tables * rate)
    shape = a + live if generator.random() < odds / (1.0 + odds) else a + live - 1.0
    return float(generator.gamma(shape, 1.0 / rate))


def topic_log_joint(docs: np.ndarray, words: np.ndarray, prior: float, beta: float,
                    n_words: int) -> float:
    """The factors of one topic in ln p(z | pi, alpha_0, beta) (theta and phi integrated out)
    from the documents and words of its tokens: sum over its documents of ln G(a + n_dk) -
    ln G(a), a = alpha_0 pi_k ``prior``, and ln G(V beta) - ln G(V beta + n_k) + sum over its
    words of ln G(beta + n_kw) - ln G(beta). 0 for a topic without tokens."""
    if docs.size == 0:
        return 0.0
    nd = np.unique(docs, return_counts=True)[1].astype(np.float64)
    nw = np.unique(words, return_counts=True)[1].astype(np.float64)
    vbeta = n_words * beta
    return float((gammaln(prior + nd) - gammaln(prior)).sum()
                 + gammaln(vbeta) - gammaln(vbeta + docs.size)
                 + (gammaln(beta + nw) - gammaln(beta)).sum())


def log_beta_density(log_v: float, log_w: float, a: float, b: float) -> float:
    """ln Beta(v; a, b) from ln v and ln w = ln(1 - v)."""
    return float((a - 1.0) * log_v + (b - 1.0) * log_w
                 - (gammaln(a) + gammaln(b) - gammaln(a + b)))


def pair_log_ratio(split: bool, docs, words, docs_k, words_k, docs_j, words_j,
                   weights: tuple[float, float], proposed: tuple[float, float], log_q: float,
                   n_empty: int, alpha0: float, beta: float, n_words: int, g: float) -> float:
    """ln of the Metropolis-Hastings ratio of a split-merge move (docs/algorithms.md §2.15)
    between the merged state (the pair's tokens, documents ``docs`` and words ``words``, in
    topic k) and the split one (``docs_k``/``words_k`` in k, ``docs_j``/``words_j`` in j);
    ``weights`` (pi_k, pi_j) now, ``proposed`` after the move, ``log_q`` the deal's log
    probability, E = ``n_empty`` empty slots now, g = gamma / K_max. A split:
    ln p(z' | pi') - ln p(z | pi) + ln Beta(v'; g, g) + ln E - ln q - ln q_v(v'), a merge:
    the same for the reverse with the split's v, E + 1 empty slots after it: so the ratio of
    a split and that of the merge back add up to 0."""
    total = weights[0] + weights[1]
    n_k, n_j = docs_k.size, docs_j.size
    c = SHARE_COUNTS / (n_k + n_j)
    qa, qb = 1.0 + c * n_k, 1.0 + c * n_j
    whole = (docs, words)
    split_k, split_j = (docs_k, words_k), (docs_j, words_j)
    if split:
        before = topic_log_joint(*whole, alpha0 * weights[0], beta, n_words)
        after = (topic_log_joint(*split_k, alpha0 * proposed[0], beta, n_words)
                 + topic_log_joint(*split_j, alpha0 * proposed[1], beta, n_words))
        log_v, log_w = np.log(proposed[0] / total), np.log(proposed[1] / total)
        return float(after - before + log_beta_density(log_v, log_w, g, g) + np.log(n_empty)
                     - log_q - log_beta_density(log_v, log_w, qa, qb))
    before = (topic_log_joint(*split_k, alpha0 * weights[0], beta, n_words)
              + topic_log_joint(*split_j, alpha0 * weights[1], beta, n_words))
    after = topic_log_joint(*whole, alpha0 * proposed[0], beta, n_words)
    log_v, log_w = np.log(weights[0] / total), np.log(weights[1] / total)
    return float(after - before - log_beta_density(log_v, log_w, g, g) + log_q
                 + log_beta_density(log_v, log_w, qa, qb) - np.log(n_empty + 1))


class HDPChain:
    """The HDP's side of a count representation (module docstring), mixed into the counts of
    the sampler that sweeps z: SparseLDA or dense (:class:`HDPCounts`), Metropolis-Hastings
    (:class:`HDPMHCounts`) or WarpLDA's order (:class:`HDPWarpCounts`). Every one of them
    takes the per-topic prior alpha_0 pi as it takes ``model.alpha: auto``'s. Live topics are
    those with tokens."""

    GLOBAL_DRAWS = True

    @classmethod
    def of_sampler(cls, sampler: str | None) -> type:
        """The HDP counts of ``inference.sampler`` (resolved): mh, warp, else SparseLDA's."""
        return {"mh": HDPMHCounts, "warp": HDPWarpCounts}.get(sampler, HDPCounts)

    def hdp_settings(self, config) -> None:
        model = config.model
        self.resample = bool(setting(model, "resample_concentration", True))
        self.alpha_prior = (float(setting(model, "alpha_a", ALPHA_PRIOR[0])),
                            float(setting(model, "alpha_b", ALPHA_PRIOR[1])))
        self.gamma_prior = (float(setting(model, "gamma_a", GAMMA_PRIOR[0])),
                            float(setting(model, "gamma_b", GAMMA_PRIOR[1])))
        self.gamma_start = float(setting(model, "gamma", GAMMA_START))
        start = setting(model, "initial_topics", "auto")
        if start == "auto":
            start = initial_hdp_topics(self.layout.n_topics)
        self.initial_topics = min(int(start), self.layout.n_topics)
        self._warned_binding = False
        self.split_merge = int(setting(model, "split_merge", SPLIT_MERGE))
        self._doc_of = None
        self.moves = [0, 0]         # splits and merges accepted after the last sweep

    def state_class(self, base: type) -> type:
        return HDPState

    def initial_z(self, stream) -> np.ndarray:
        """Every token in one of the first ``model.initial_topics`` slots, uniformly (one
        uniform per token from ``stream``, in token order); the other slots start empty, and
        topics are born from them as the data ask."""
        self._start = np.random.Generator(stream)
        u = self._start.random(self.layout.n_tokens)
        return np.minimum((u * self.initial_topics).astype(np.int64),
                          self.initial_topics - 1).astype(np.int32)

    def initial(self, stream) -> tuple:
        """(z, n_dk, n_kw, n_k) of :meth:`initial_z`."""
        L = self.layout
        z = self.initial_z(stream)
        ndk = np.zeros((L.n_docs, L.n_topics), dtype=np.int32)
        nkw = np.zeros((L.n_words, L.n_topics), dtype=np.int32)
        _warp.count_topics(L.doc_ptr, L.words, z, ndk, nkw)
        return z, ndk, nkw, nkw.sum(axis=0, dtype=np.int64)

    def tables_of(self, state, weight: np.ndarray, generator: np.random.Generator
                  ) -> np.ndarray:
        """m_.k from the state's n_dk (:func:`crt_tables`)."""
        return crt_tables(self.sync(state).ndk, weight, generator, self.layout.doc_ptr)

    def started(self, state):
        """The first state: alpha_0 = model.alpha, gamma = model.gamma, and the tables and
        pi drawn given the first z (from pi uniform, continuing the init stream), so that the
        first sweep sees the empty slots with the small weight their posterior gives them:
        with pi uniform every empty slot would take tokens at once, and the topics born
        together split the data's topics between them."""
        state = super().started(state)
        K = self.layout.n_topics
        state.concentration = float(state.alpha[0])
        state.gamma = self.gamma_start
        state.pi = np.full(K, 1.0 / K)
        state.alpha = state.concentration * state.pi
        state.tables = self.tables_of(state, state.alpha, self._start)
        state.pi = draw_weights(state.tables, state.gamma, self._start)
        state.alpha = state.concentration * state.pi
        return state

    def grown(self, state, old):
        """The run's global draws go on: pi, alpha_0, gamma and the tables of its last sweep
        (drawn again after the next one)."""
        state = super().grown(state, old)
        state.pi, state.tables = np.array(old.pi), np.array(old.tables)
        state.concentration, state.gamma = float(old.concentration), float(old.gamma)
        return state

    def draw_globals(self, state, streams) -> bool:
        """After every sweep (the driver's ``global_draws``, on one machine or a cluster):
        ``model.split_merge`` split-merge moves (:meth:`split_merge_move`), then
        :meth:`global_step`, from the persistent stream ``topictk.streams.HDP``. Returns
        whether a move changed z."""
        generator = np.random.Generator(streams.persistent(keys.HDP))
        self.moves = [0, 0]
        for _ in range(self.split_merge):
            moved = self.split_merge_move(state, generator)
            if moved:
                self.moves[0 if moved > 0 else 1] += 1
        self.global_step(state, generator)
        return any(self.moves)

    @property
    def doc_of(self) -> np.ndarray:
        """(N,) int32 the document of every token."""
        if self._doc_of is None:
            L = self.layout
            self._doc_of = np.repeat(np.arange(L.n_docs, dtype=np.int32), np.diff(L.doc_ptr))
        return self._doc_of

    def split_merge_move(self, state, generator: np.random.Generator) -> int:
        """One Metropolis-Hastings split-merge move on (z, pi) (docs/algorithms.md §2.15;
        Jain & Neal 2004, Dahl 2005's sequential allocation, Wang & Blei 2012 for the HDP),
        with pi_k + pi_j of the pair kept and its share v = pi_k / (pi_k + pi_j) moved, whose
        prior under Dir(gamma / K_max) is Beta(gamma / K_max, gamma / K_max). Two tokens i, i'
        drawn uniformly: in one topic k, a split of k with an empty slot j (uniform among the
        E empty ones): i stays, i' goes to j, the others are dealt by
        :func:`topictk.inference.gibbs._hdp.sequential_allocation` in token order, and v is
        drawn from Beta(1 + c n_k / n, 1 + c n_j / n), c = SHARE_COUNTS; in two topics k and
        l, the merge of l into k, v drawn from its prior. Accepted with the ratio of
        p(z, v) times the reverse proposal over the forward one. Returns 1 for an accepted
        split, -1 for a merge, 0 otherwise."""
        L = self.layout
        N, K, V = L.n_tokens, L.n_topics, L.n_words
        if N < 2:
            return 0
        u = generator.random(3)
        i, i2 = min(int(u[0] * N), N - 1), min(int(u[1] * N), N - 1)
        if i == i2:
            return 0
        z, pi, a0, beta = state.z, state.pi, float(state.concentration), float(state.beta)
        k, l = int(z[i]), int(z[i2])
        n_empty = K - int(np.count_nonzero(state.nk))
        split = k == l
        if split:
            if n_empty == 0:
                return 0
            j = int(np.flatnonzero(state.nk == 0)[min(int(u[2] * n_empty), n_empty - 1)])
            members = np.flatnonzero(z == k)
        else:
            j = l
            members = np.flatnonzero((z == k) | (z == l))
        others = members[(members != i) & (members != i2)].astype(np.int64)
        total = float(pi[k] + pi[j])
        args = (a0 * total / 2.0, beta, V * beta, L.n_docs, V)
        side = np.empty(others.size, dtype=np.int8)
        if split:
            log_q = _hdp.sequential_allocation(others, self.doc_of, L.words, i, i2,
                                               generator.random(others.size),
                                               np.zeros(0, dtype=np.int8), False, *args, side)
        else:
            side = (z[others] == l).astype(np.int8)
            log_q = _hdp.sequential_allocation(others, self.doc_of, L.words, i, i2,
                                               np.zeros(0), side, True, *args,
                                               np.empty(others.size, dtype=np.int8))
        to_k = np.append(others[side == 0], i)
        to_j = np.append(others[side == 1], i2)
        c = SHARE_COUNTS / members.size
        qa, qb = 1.0 + c * to_k.size, 1.0 + c * to_j.size
        g = float(state.gamma) / K
        if split:
            v = float(generator.beta(qa, qb))
            new_k, new_j = total * v, total * (1.0 - v)
        else:
            log_g = np.log(generator.standard_gamma(g + 1.0, 2)) + np.log(
                generator.random(2)) / g
            log_g -= np.logaddexp(log_g[0], log_g[1])
            new_k = max(total * float(np.exp(log_g[0])), PI_FLOOR)
            new_j = max(total * float(np.exp(log_g[1])), PI_FLOOR)
        log_ratio = pair_log_ratio(split, self.doc_of[members], L.words[members],
                                   self.doc_of[to_k], L.words[to_k], self.doc_of[to_j],
                                   L.words[to_j], (float(pi[k]), float(pi[j])),
                                   (new_k, new_j), log_q, n_empty, a0, beta, V, g)
        if np.log(generator.random()) >= log_ratio:
            return 0
        kept, moved = (to_k, to_j) if split else (members, np.zeros(0, dtype=np.int64))
        z[to_j] = j if split else k
        pi[k], pi[j] = new_k, new_j
        state.alpha = state.concentration * pi
        self.recount(state, k, j, kept, moved)
        return 1 if split else -1

    def recount(self, state, k: int, j: int, in_k: np.ndarray, in_j: np.ndarray) -> None:
        """The counts of topics k and j after a move, from their tokens ``in_k``, ``in_j``."""
        L = self.layout
        state.nk[k], state.nk[j] = in_k.size, in_j.size
        if state.ndk is not None:
            for topic, tokens in ((k, in_k), (j, in_j)):
                state.ndk[:, topic] = np.bincount(self.doc_of[tokens], minlength=L.n_docs)
                state.nkw[:, topic] = np.bincount(L.words[tokens], minlength=L.n_words)
        self.counts_changed(state)

    def counts_changed(self, state) -> None:
        """What the sampler keeps of the counts is out of date (a move changed them)."""

    def global_step(self, state, generator: np.random.Generator) -> None:
        """Tables, weights and (with ``resample_concentration``) alpha_0 and gamma, in this
        order; then alpha = alpha_0 pi."""
        state.tables = self.tables_of(state, state.alpha, generator)
        total = int(state.tables.sum())
        state.pi = draw_weights(state.tables, state.gamma, generator)
        if self.resample:
            lengths = np.diff(self.layout.doc_ptr)
            state.concentration = resample_alpha0(state.concentration, lengths, total,
                                                  self.alpha_prior, generator)
            state.gamma = resample_gamma(state.gamma, int(np.count_nonzero(state.tables)),
                                         total, self.gamma_prior, generator)
        state.alpha = state.concentration * state.pi

    def metrics(self, state) -> dict:
        """What a metrics line records of the chain: live K (topics with tokens), alpha_0,
        gamma. Live K in BINDING_SHARE of the slots or more is a warning, once per run."""
        live, K = int(np.count_nonzero(state.nk)), self.layout.n_topics
        if live >= BINDING_SHARE * K and not self._warned_binding:
            self._warned_binding = True
            log.warning("model.max_topics = %d binds at step %d: %d of its %d slots hold "
                        "tokens, so the data may ask for more topics than the truncation "
                        "allows; train again with a larger model.max_topics (e.g. %d)",
                        K, state.step, live, K, 2 * K)
        return {"live_k": live, "splits": self.moves[0], "merges": self.moves[1],
                "alpha": round(float(state.concentration), 6),
                "gamma": round(float(state.gamma), 6)}

    def listed_topics(self, state) -> np.ndarray:
        """The live topics (with tokens), largest first (tokens n_k descending, ties by slot);
        a topic's id stays its slot number + 1, whatever its rank."""
        live = np.flatnonzero(state.nk)
        return live[np.argsort(-np.asarray(state.nk)[live], kind="stable")]

    def topic_weights(self, state) -> dict[str, np.ndarray]:
        """(K,) weights of every slot: ``pi`` (the global weight) and ``share`` (of the
        tokens)."""
        nk = np.asarray(state.nk, dtype=np.float64)
        return {"pi": np.asarray(state.pi, dtype=np.float64), "share": nk / max(nk.sum(), 1.0)}

    def learnt_alpha(self, state) -> np.ndarray:
        return state.alpha


class HDPCounts(HDPChain, SparseLDACounts):
    """SparseLDA's (or the dense sampler's) counts over K_max slots, with the HDP's global
    draws after every sweep; the one HDP representation a Dask cluster sweeps (its z and n_dk
    are brought back from the workers for the table draw)."""

    name = "sparse"

    def __init__(self, layout, opts, steps: int, sync=None, *, config=None):
        super().__init__(layout, opts, steps, sync)
        self.hdp_settings(config)

    def counts_changed(self, state) -> None:
        self._lists_for = None      # the SparseLDA lists are built again from n_kw


class HDPMHCounts(HDPChain, MHCounts):
    """The MH sampler's dense counts (§2.7) over K_max slots: its document proposal draws
    from alpha_0 pi's alias table, rebuilt at every sweep as pi changes."""

    def __init__(self, layout, opts, steps: int, sync=None, *, config=None):
        super().__init__(layout, opts, steps, sync)
        self.hdp_settings(config)


class HDPWarpCounts(HDPChain, WarpCounts):
    """WarpLDA-order counts (§2.9) over K_max slots: z and n_k; the table draw reads n_dk's
    non-zero entries, counted from z."""

    def __init__(self, layout, opts, steps: int, sync=None, *, config=None):
        super().__init__(layout, opts, steps, sync)
        self.hdp_settings(config)

    def state_class(self, base: type) -> type:
        return HDPWarpState

    def counts_changed(self, state) -> None:
        state.word_rows = None      # n_kw's non-zero entries are counted again from z

    def initial(self, stream) -> tuple:
        z = self.initial_z(stream)
        return z, None, None, word_frequencies(z, self.layout.n_topics)

    def tables_of(self, state, weight, generator):
        rows = self.document_rows(state)
        return crt_tables_of_rows(rows["ndk_ptr"], rows["ndk_topic"], rows["ndk_count"],
                                  weight, generator)
