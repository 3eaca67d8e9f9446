"""Mutation check: put one deliberate bug at a time into a copy of the repository and see whether
the tests that should notice it fail.

Every mutation is an exact text replacement (file, old text, new text) that makes the code
wrong in a way a reader of docs/algorithms.md would call a bug: a flipped sign, an off-by-one, a
dropped factor, a swapped index, a stale count. The old text must occur exactly once in its
file, so a mutation that no longer applies (the code moved) is reported as ``stale`` rather
than silently skipped.

How it runs:

1. The repository (without ``.git``) is copied to a temporary directory, built kernels
   included; when the kernels are not built there, they are built once.
2. For each mutation the file is changed in the copy; a changed ``.pyx`` or ``.pxd`` is rebuilt
   in place (``setup.py build_ext --inplace``, which recompiles only the extensions whose
   sources changed).
3. The mutation's own list of tests runs in the copy with ``pytest -x`` and a time limit.
   A failing test kills the mutation; all passing means it survived.
4. The file, and any rebuilt ``.c``/``.so``, are put back before the next mutation.

The golden-output tests (``tests/golden``) are deliberately in no list: they flag any change in
any number, so they would kill every mutation without telling whether a test of the algorithm
would.

Usage (from the repository root, with the development environment active)::

    python tests/mutation/run.py                     # the whole list (about 10 min on 2 cores)
    python tests/mutation/run.py --quick             # a few Python-only mutations (minutes)
    python tests/mutation/run.py --only sgrld-rescaling-dropped l2r-alpha-one
    python tests/mutation/run.py --only l2r-alpha-one \
        --tests tests/kernels/test_left_to_right.py::test_document_log_likelihoods_equal_exact_values
    python tests/mutation/run.py --list              # ids, files and kinds, nothing run
    python tests/mutation/run.py --check             # only check that every old text applies
    python tests/mutation/run.py --report benchmarks/results/mutation.md

The exit status is 0 when every mutation was killed, 1 when one survived or could not be
applied. The file is named so that pytest does not collect it.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# test lists, by what they check
SCHEDULES = "tests/unit/test_schedules.py"
SGRLD = "tests/minibatch/test_sgrld.py"
HSVG = "tests/minibatch/test_hsvg.py"
OVB = "tests/variational/test_ovb.py"
VB = "tests/variational/test_vb.py"
CVB = "tests/variational/test_cvb.py"
GIBBS_REF = "tests/kernels/test_gibbs_reference.py"
GIBBS_MODEL = "tests/kernels/test_gibbs_model.py"
GIBBS_EXACT = "tests/kernels/test_gibbs_exact.py"
L2R = "tests/kernels/test_left_to_right.py"
DMR = "tests/dmr/test_dmr.py"
PEM = "tests/dmr/test_pem.py"
DLDA_KERNEL = "tests/dlda/test_kernel.py"
DLDA_UPDATES = "tests/dlda/test_updates.py"
DLDA_DRIVERS = "tests/dlda/test_drivers.py"
EVALUATION = "tests/unit/test_evaluation.py"
SPECIAL = "tests/unit/test_special.py"
STORE = "tests/unit/test_corpus_store.py"
TEXT_VOCAB = "tests/unit/test_corpus_text_vocab.py"
PREPARE = "tests/corpus/test_prepare_fixed_inputs.py"
BAD_INPUT = "tests/integration/test_bad_input.py"
UCI = "tests/data_scripts/test_ds_uci_bow.py"
PIPELINE = "tests/variational/test_pipeline.py"
READERS = "tests/unit/test_readers.py"
# the WarpLDA-order chain against the exact posterior of a 7-token corpus (not the twin, which
# any change of the kernel fails)
WARP_POSTERIOR = "tests/kernels/test_warp.py::test_warp_chain_stays_close_to_the_posterior"
# scoring a sample kept as non-zero counts against the dense path's numbers
SPARSE_SCORE = "tests/kernels/test_sparse_score.py"
WARP_SCORING = ("tests/integration/test_warp_sampler.py"
                "::test_samples_score_as_the_dense_path_without_dense_counts")
WARP_TOP_WORDS = ("tests/integration/test_warp_sampler.py"
                  "::test_top_words_and_topic_quality_without_dense_counts")
WARP_INFER = "tests/integration/test_warp_sampler.py::test_infer_without_dense_counts"
WARP_ALPHA = "tests/integration/test_warp_sampler.py::test_learnt_alpha_without_dense_counts"
WARP_TWIN = "tests/kernels/test_warp.py::test_sweeps_equal_reference"
WARP_ORDER = "tests/kernels/test_warp.py::test_word_order_is_the_stable_argsort_of_the_words"
WARP_ROWS = "tests/integration/test_warp_sampler.py::test_word_counts_are_counted_once_per_sweep"
CO_COUNTS = ("tests/unit/test_evaluation.py"
             "::test_co_document_counts_equal_direct_counts_whatever_the_group")
# the first updates' step sizes written out; alpha by a dense Newton solve on the
# particle-weighted statistic; UMass and NPMI counted directly on the coherence top words
HSVG_SCHEDULE = ("tests/minibatch/test_hsvg.py"
                 "::test_step_sizes_follow_the_schedule_from_the_first_update")
PEM_ALPHA = ("tests/dmr/test_pem.py"
             "::test_learnt_alpha_is_the_newton_step_on_the_particle_weighted_statistic")
COHERENCE_TOP = ("tests/unit/test_evaluation.py"
                 "::test_coherence_is_scored_on_the_coherence_top_words_not_the_diversity_top",
                 "tests/unit/test_evaluation.py"
                 "::test_evaluate_scores_coherence_on_the_configured_top_words")


@dataclass(frozen=True)
class Mutation:
    id: str
    path: str        # relative to the repository root
    old: str         # must occur exactly once in the file
    new: str
    kind: str        # sign flip, off-by-one, dropped factor, swapped index, stale count, ...
    tests: tuple[str, ...]
    quick: bool = False

    @property
    def compiled(self) -> bool:
        return self.path.endswith((".pyx", ".pxd"))


M = Mutation
MUTATIONS: list[Mutation] = [
    # ------------------------------------------------------------------ schedules (§12.1)
    M("sgmcmc-exponent-halved", "topictk/inference/schedules.py",
      "return a * (1.0 + t / b) ** (-c)", "return a * (1.0 + t / b) ** (-c / 2)",
      "dropped factor", (SCHEDULES, SGRLD, DMR), quick=True),
    M("sgmcmc-step-constant", "topictk/inference/schedules.py",
      "return a * (1.0 + t / b) ** (-c)", "return a",
      "dropped factor", (SCHEDULES, SGRLD, DMR), quick=True),
    M("svi-rate-exponent-halved", "topictk/inference/minibatch.py",
      "return min(1.0, base ** (-kappa))", "return min(1.0, base ** (-kappa / 2))",
      "dropped factor", (SCHEDULES, OVB, HSVG)),
    M("sample-steps-off-by-one", "topictk/inference/minibatch.py",
      "burn_in + int(round((i + 1) * span / n))", "burn_in + int(round(i * span / n))",
      "off-by-one", (SGRLD, DMR)),
    # ------------------------------------------------------------------ kernels
    M("warp-word-proposal-reads-itself", "topictk/inference/gibbs/_warp.pyx",
      "        if j == i:\n            j = begin + others",
      "        if j == -1:\n            j = begin + others",
      "wrong proposal", (WARP_POSTERIOR,)),
    M("warp-topic-total-dropped", "topictk/inference/gibbs/_warp.pyx",
      "accept = u[m] * (row[s] + a_s) * (nk[t] + b_t) < (row[t] + a_t) * (nk[s] + b_s)",
      "accept = u[m] * (row[s] + a_s) < (row[t] + a_t)",
      "dropped factor", (WARP_POSTERIOR,)),
    M("warp-count-keeps-token", "topictk/inference/gibbs/_warp.pyx",
      "    cdef double a_s, a_t, b_s, b_t\n    row[s] -= 1\n    nk[s] -= 1\n",
      "    cdef double a_s, a_t, b_s, b_t\n    nk[s] -= 1\n",
      "stale count", (WARP_POSTERIOR,)),
    M("warp-prior-proposal-reads-a-token", "topictk/inference/gibbs/_warp.pyx",
      "return (read & ~low) | ((<int32_t> (-1 - at)) & low)", "return read",
      "wrong proposal", (WARP_TWIN,)),
    M("warp-lookup-keeps-the-entry", "topictk/inference/gibbs/_warp.pyx",
      "at[m] = _pick(e >= 0, pos, e)", "at[m] = e",
      "wrong proposal", (WARP_TWIN,)),
    M("warp-doc-round-other-word-block", "topictk/inference/gibbs/_warp.pyx",
      "n += every or wp.word_block[wp.words[i]] == block",
      "n += every or wp.word_block[wp.words[i]] != block",
      "wrong block", (WARP_TWIN,)),
    M("word-order-rank-dropped", "topictk/inference/base.py",
      "word_tokens[filled[ranked] + rank] = order + begin",
      "word_tokens[filled[ranked]] = order + begin",
      "dropped term", (WARP_ORDER,)),
    M("warp-word-rows-kept-across-sweeps", "topictk/inference/gibbs/warp.py",
      "        state.word_rows = None\n", "",
      "stale count", (WARP_ROWS,)),
    M("co-document-counts-of-the-first-group", "topictk/evaluation/coherence.py",
      "union, position = np.unique(top[begin:begin + step], return_inverse=True)",
      "union, position = np.unique(top[:step], return_inverse=True)",
      "wrong slice", (CO_COUNTS,)),
    M("sparse-score-weight-beta-dropped", "topictk/inference/gibbs/_sparse_score.pyx",
      "        return (r.count[r.ptr[w] + at] + r.beta) / r.den[k]",
      "        return r.count[r.ptr[w] + at] / r.den[k]",
      "dropped term", (SPARSE_SCORE,)),
    M("sparse-score-zero-count-weight-of-topic-0", "topictk/inference/gibbs/_sparse_score.pyx",
      "        zero[k] = beta / den[k]", "        zero[k] = beta / den[0]",
      "swapped index", (SPARSE_SCORE,)),
    M("sparse-score-fold-in-count-keeps-token", "topictk/inference/gibbs/_sparse_score.pyx",
      "            k = s.zbuf[i]\n            s.nd[k] -= 1\n            if s.nd[k] == 0:",
      "            k = s.zbuf[i]\n            if s.nd[k] == 1:\n                s.nd[k] -= 1\n"
      "            if s.nd[k] == 0:",
      "stale count", (SPARSE_SCORE,)),
    M("sparse-score-protocol-b-prior-dropped", "topictk/inference/gibbs/_sparse_score.pyx",
      "                theta[tid][k] = alpha[k] / denom",
      "                theta[tid][k] = 0.0",
      "dropped term", (SPARSE_SCORE,)),
    M("sparse-score-overlay-left-out-of-beta-bar", "topictk/inference/gibbs/_sparse_score.pyx",
      "            den[k] = nk[k] + den[k]", "            den[k] = nk[k] + r.V * r.beta",
      "dropped term", (SPARSE_SCORE,)),
    M("sparse-score-overlay-skipped-by-the-walk", "topictk/inference/gibbs/_sparse_score.pyx",
      "        if c.m < c.m_end and r.o_topic[c.m] < stop:",
      "        if c.m < c.m_end and r.o_topic[c.m] < stop and False:",
      "dropped term", (SPARSE_SCORE,)),
    M("sparse-score-overlay-row-left-spread", "topictk/inference/gibbs/_sparse_score.pyx",
      "        o_row[r.o_topic[m]] = r.o_extra[m] if put else 0.0",
      "        o_row[r.o_topic[m]] = r.o_extra[m]",
      "stale count", (SPARSE_SCORE,)),
    M("sparse-score-given-phi-read-transposed", "topictk/inference/gibbs/_sparse_score.pyx",
      "        acc = acc + coef[k] * r.phi[k * r.V + w]",
      "        acc = acc + coef[k] * r.phi[w * r.K + k]",
      "swapped index", (SPARSE_SCORE,)),
    M("sparse-objective-prior-term-kept", "topictk/inference/gibbs/warp.py",
      "(gammaln(ndk[\"ndk_count\"][begin:begin + block] + a) - gammaln(a)).sum()",
      "gammaln(ndk[\"ndk_count\"][begin:begin + block] + a).sum()",
      "wrong term", (WARP_SCORING,)),
    M("warp-top-words-repeat-counted", "topictk/inference/gibbs/warp.py",
      "top[k, have.size:] = candidates[~np.isin(candidates, counted)][:missing]",
      "top[k, have.size:] = candidates[:missing]",
      "wrong order", (WARP_TOP_WORDS,)),
    M("sparse-theta-out-reversed", "topictk/inference/gibbs/_sparse_score.pyx",
      "f.theta_out[d * K + k] = theta[k]", "f.theta_out[d * K + k] = theta[K - 1 - k]",
      "wrong index", (SPARSE_SCORE, WARP_INFER)),
    M("minka-rows-count-off-by-one", "topictk/inference/hyper.py",
      "hist = np.bincount(count * K + topic,", "hist = np.bincount((count - 1) * K + topic,",
      "off by one", ("tests/kernels/test_gibbs_model.py", WARP_ALPHA)),
    M("warp-ranked-words-count-of-next", "topictk/inference/gibbs/warp.py",
      "counts[k, :have.size] = count[ranked]",
      "counts[k, :have.size] = count[np.minimum(ranked + 1, count.size - 1)]",
      "wrong index", (WARP_TOP_WORDS,)),
    M("gibbs-dense-beta-dropped", "topictk/inference/gibbs/_gibbs.pyx",
      "p[kk] = coef[kk] * (nw[kk] + beta)", "p[kk] = coef[kk] * nw[kk]",
      "dropped term", (GIBBS_REF,)),
    M("gibbs-dense-stale-topic-total", "topictk/inference/gibbs/_gibbs.pyx",
      "    nk[k] -= 1\n    _dense_refresh(wk, sc, nk, k, bbar)\n\n\ncdef inline void _dense_add",
      "    nk[k] -= 1\n\n\ncdef inline void _dense_add",
      "stale count", (GIBBS_REF,)),
    M("gibbs-sparse-doc-bucket-beta-dropped", "topictk/inference/gibbs/_gibbs.pyx",
      "    wk.r += wk.nd[k] * beta * inv\n    sc.coef[k] = (wk.a[k] + wk.nd[k]) * inv",
      "    wk.r += wk.nd[k] * inv\n    sc.coef[k] = (wk.a[k] + wk.nd[k]) * inv",
      "dropped factor", (GIBBS_REF,)),
    M("gibbs-sparse-smoothing-sign", "topictk/inference/gibbs/_gibbs.pyx",
      "    wk.s -= wk.a[k] * beta * inv\n    wk.r -= wk.nd[k] * beta * inv",
      "    wk.s += wk.a[k] * beta * inv\n    wk.r -= wk.nd[k] * beta * inv",
      "sign flip", (GIBBS_REF,)),
    M("fold-in-alpha-dropped", "topictk/inference/_heldout.pyx",
      "theta[k] = (s.kept[k] / <double> n_kept + alpha[k]) / denom",
      "theta[k] = (s.kept[k] / <double> n_kept) / denom",
      "dropped term", (GIBBS_REF, GIBBS_MODEL, EVALUATION)),
    M("minibatch-thread-merge-index", "topictk/inference/_minibatch.pyx",
      "(&word_topic[0, 0])[i] += buffers[t * VB * K + i]",
      "(&word_topic[0, 0])[i] += buffers[i]",
      "swapped index", (SGRLD,)),
    M("docsampler-alpha-one", "topictk/_cy/docsampler.pxd",
      "c = c + (nd[kk] + alpha[kk]) * wrow[kk]", "c = c + (nd[kk] + 1.0) * wrow[kk]",
      "dropped factor", (SGRLD, HSVG)),
    M("vb-elogphi-sign", "topictk/inference/variational/_vb.pyx",
      "e = digamma(x) - psi_total[k]", "e = digamma(x) + psi_total[k]",
      "sign flip", (VB,)),
    M("vb-estep-count-dropped", "topictk/inference/variational/_vb.pyx",
      "        f = cts[j] / z\n        f1 = ", "        f = 1.0 / z\n        f1 = ",
      "dropped factor", (VB,)),
    M("cvb-stale-document-count", "topictk/inference/variational/_cvb.pyx",
      "a = alpha[k] + _pos(md[k] - g)", "a = alpha[k] + _pos(md[k])",
      "stale count", (CVB,)),
    M("cvb-variance-factor-dropped", "topictk/inference/variational/_cvb.pyx",
      "gv = g * (1.0 - g)", "gv = g",
      "dropped factor", (CVB,)),
    M("cvb-normaliser-dropped", "topictk/inference/variational/_cvb.pyx",
      "u = a * b / z", "u = a * b",
      "dropped factor", (CVB,)),
    M("pem-direct-term-dropped", "topictk/inference/variational/_pem.pyx",
      "g = pm.alpha[k] + A[k] * acc[k] + direct[k]", "g = pm.alpha[k] + A[k] * acc[k]",
      "dropped term", (PEM,)),
    M("pem-document-weight-dropped", "topictk/inference/variational/_pem.pyx",
      "c = c * weight", "c = c", "dropped factor", (PEM,)),
    M("pem-weighted-particle-row-ignored", "topictk/inference/variational/_pem.pyx",
      "zs = wp.pair_z + p * wp.M", "zs = wp.pair_z",
      "swapped index", (PEM,)),
    M("pem-temperature-inverted", "topictk/_cy/estep.pxd",
      "A[k] = exp((elog[k] - m) / temperature)", "A[k] = exp((elog[k] - m) * temperature)",
      "swapped operation", (PEM,)),
    M("dmr-gradient-alpha-factor-dropped", "topictk/inference/dmr/_dmr.pyx",
      "g[k] = a[k] * (c + dg)", "g[k] = c + dg",
      "dropped factor", (DMR,)),
    M("dmr-polya-sign", "topictk/inference/dmr/_dmr.pyx",
      "v = lngamma(total) - lngamma(total + lengths[d])",
      "v = lngamma(total) + lngamma(total + lengths[d])",
      "sign flip", (DMR,)),
    M("dmr-small-count-off-by-one", "topictk/inference/dmr/_dmr.pyx",
      "s = s + log(a + j)", "s = s + log(a + j + 1)",
      "off-by-one", (DMR,)),
    M("dlda-gamma-rate-term-dropped", "topictk/inference/dlda/_dlda.pyx",
      "rate = c[l - 1] + q[l]", "rate = c[l - 1]",
      "dropped term", (DLDA_KERNEL,)),
    M("dlda-q-recursion-inverted", "topictk/inference/dlda/_dlda.pyx",
      "q[l + 1] = log1p(q[l] / c[l - 1])", "q[l + 1] = log1p(q[l] * c[l - 1])",
      "swapped operation", (DLDA_KERNEL,)),
    M("l2r-normaliser-off-by-one", "topictk/evaluation/_left_to_right.pyx",
      "pn += p / (n + alpha_sum)", "pn += p / (n + 1 + alpha_sum)",
      "off-by-one", (L2R,)),
    M("l2r-stale-particle-count", "topictk/evaluation/_left_to_right.pyx",
      "cr[zr[n2]] -= 1", "cr[zr[n2]] -= 0",
      "stale count", (L2R,)),
    M("l2r-first-heldout-skipped", "topictk/evaluation/_left_to_right.pyx",
      "            if n >= n_obs:\n                pn += p",
      "            if n > n_obs:\n                pn += p",
      "off-by-one", (L2R,)),
    M("special-trigamma-as-digamma", "topictk/_cy/special.pyx",
      "return _elementwise(x, trigamma)", "return _elementwise(x, digamma)",
      "swapped function", (SPECIAL,)),
    # ------------------------------------------------------------------ global updates
    M("sgrld-rescaling-dropped", "topictk/inference/sgrld/driver.py",
      "eps, self.n_docs / ids.size, noise, phi)", "eps, 1.0, noise, phi)",
      "dropped factor", (SGRLD,), quick=True),
    M("sgrld-noise-factor-two-dropped", "topictk/inference/sgrld/driver.py",
      "noise *= np.sqrt(2.0 * eps * phi_hat)", "noise *= np.sqrt(eps * phi_hat)",
      "dropped factor", (SGRLD,)),
    M("sgrld-decay-sign", "topictk/inference/sgrld/driver.py",
      "new += (1.0 - eps) * phi_hat", "new += (1.0 + eps) * phi_hat",
      "sign flip", (SGRLD,)),
    M("hsvg-rescaling-dropped", "topictk/inference/variational/hsvg.py",
      "rho, self.n_docs / docs.size)", "rho, 1.0)",
      "dropped factor", (HSVG,), quick=True),
    M("hsvg-step-size-one-step-late", "topictk/inference/variational/hsvg.py",
      "rho = step_size(t, self.tau0, self.kappa)",
      "rho = step_size(t - 1, self.tau0, self.kappa)",
      "off-by-one", (HSVG_SCHEDULE,)),
    M("ovb-rescaling-dropped", "topictk/inference/variational/ovb.py",
      "ratio = self.n_docs / docs.size                         # R_B", "ratio = 1.0",
      "dropped factor", (OVB,)),
    M("ovb-step-size-dropped", "topictk/inference/variational/ovb.py",
      "factor = rho * ratio / scale", "factor = ratio / scale",
      "dropped factor", (OVB,)),
    M("vb-mstep-prior-dropped", "topictk/inference/variational/vb.py",
      "state.lam = sstats + state.beta", "state.lam = sstats",
      "dropped term", (VB,)),
    M("pem-mstep-weights-dropped", "topictk/inference/variational/pem.py",
      "np.ascontiguousarray(state.omega), pair_z",
      "np.ones_like(state.omega), pair_z",
      "dropped factor", (PEM,)),
    M("pem-alpha-from-particle-0", "topictk/inference/variational/pem.py",
      "else weighted_elog_theta_sum(state.gamma, state.omega))",
      "else elog_theta_sum(state.gamma[0]))",
      "swapped index", (PEM_ALPHA,)),
    M("pem-particle-weights-temperature", "topictk/inference/variational/pem.py",
      "x = np.exp((bounds - bounds.max(axis=-1, keepdims=True)) / temperature)",
      "x = np.exp((bounds - bounds.max(axis=-1, keepdims=True)) * temperature)",
      "swapped operation", (PEM,)),
    M("dmr-sgld-prior-sign", "topictk/inference/dmr/driver.py",
      "gradient = -state.nu / self.variances + scale", "gradient = state.nu / self.variances + scale",
      "sign flip", (DMR,)),
    M("dmr-sgld-rescaling-dropped", "topictk/inference/dmr/driver.py",
      "+ scale * feature_products(gbar, X_batch)", "+ feature_products(gbar, X_batch)",
      "dropped factor", (DMR,)),
    M("dmr-penalty-gradient-sign", "topictk/inference/dmr/driver.py",
      "grad - diff / variances)", "grad + diff / variances)",
      "sign flip", (DMR,)),
    M("tlasgr-rescaling-dropped", "topictk/inference/dlda/driver.py",
      "a = scale * xbar + eta", "a = xbar + eta",
      "dropped factor", (DLDA_UPDATES, DLDA_DRIVERS)),
    M("tlasgr-r-rescaling-dropped", "topictk/inference/dlda/driver.py",
      "A_r = c0 + scale * qbar", "A_r = c0 + qbar",
      "dropped factor", (DLDA_UPDATES, DLDA_DRIVERS)),
    M("tlasgr-fisher-forgetting-dropped", "topictk/inference/dlda/driver.py",
      "return (1.0 - eps_prime) * M + eps_prime * total",
      "return (1.0 - eps_prime) * M + total",
      "dropped factor", (DLDA_UPDATES, DLDA_DRIVERS)),
    M("dlda-sgrld-noise-factor-two-dropped", "topictk/inference/dlda/driver.py",
      "new += np.sqrt(2.0 * eps * phi_hat) * noise", "new += np.sqrt(eps * phi_hat) * noise",
      "dropped factor", (DLDA_UPDATES, DLDA_DRIVERS)),
    M("gibbs-sample-schedule-off-by-one", "topictk/inference/gibbs/driver.py",
      "collect = (state.step > opts.burn_in and", "collect = (state.step >= opts.burn_in and",
      "off-by-one", (GIBBS_MODEL, "tests/integration/test_resume.py")),
    M("minka-denominator-mean", "topictk/inference/hyper.py",
      "np.array([alpha.sum()])", "np.array([alpha.mean()])",
      "swapped operation", (GIBBS_MODEL,)),
    M("minka-increments-off-by-one", "topictk/inference/hyper.py",
      "j = np.arange(n_max)[:, None]", "j = np.arange(1, n_max + 1)[:, None]",
      "off-by-one", (GIBBS_MODEL,)),
    # ------------------------------------------------------------------ evaluators
    M("l2r-alpha-one", "topictk/evaluation/left_to_right.py",
      "np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)",
      "np.ones_like(np.atleast_2d(alpha), dtype=np.float64)",
      "dropped factor", (L2R,), quick=True),
    M("l2r-sample-average-off-by-one", "topictk/evaluation/left_to_right.py",
      "- np.log(len(pairs))", "- np.log(len(pairs) + 1)",
      "off-by-one", (L2R, DMR)),
    M("sgrld-prior-alpha-one", "topictk/inference/sgrld/driver.py",
      "documents: str) -> np.ndarray:\n        return state.alpha",
      "documents: str) -> np.ndarray:\n        return np.ones_like(state.alpha)",
      "dropped factor", (L2R,)),
    M("perplexity-normaliser-off-by-one", "topictk/inference/perplexity.py",
      "np.dot(counts, log_p) / total)", "np.dot(counts, log_p) / (total + 1))",
      "off-by-one", (EVALUATION, PIPELINE), quick=True),
    M("umass-swapped-index", "topictk/evaluation/coherence.py",
      "np.log((co[m, l] + 1.0) / co[l, l])", "np.log((co[m, l] + 1.0) / co[m, m])",
      "swapped index", (EVALUATION,)),
    M("npmi-normalisation-dropped", "topictk/evaluation/coherence.py",
      "values.append(pmi / -np.log(joint))", "values.append(pmi)",
      "dropped factor", (EVALUATION,)),
    M("coherence-on-diversity-top", "topictk/evaluation/coherence.py",
      "coherent = np.ascontiguousarray(top[:, :min(coherence_top, n_words)])",
      "coherent = np.ascontiguousarray(top[:, :min(diversity_top, n_words)])",
      "swapped argument", COHERENCE_TOP),
    M("top-words-order-sign", "topictk/evaluation/coherence.py",
      "np.argsort(-topic_word, axis=1, kind=\"stable\")",
      "np.argsort(topic_word, axis=1, kind=\"stable\")",
      "sign flip", (EVALUATION,)),
    # ------------------------------------------------------------------ readers
    M("uci-word-ids-off-by-one", "topictk/corpus/readers.py",
      "docs[order] - 1, word_ids[order] - 1, counts[order]",
      "docs[order] - 1, word_ids[order], counts[order]",
      "off-by-one", (READERS, BAD_INPUT, UCI)),
    M("uci-indptr-off-by-one", "topictk/corpus/readers.py",
      "np.add.at(indptr, docs + 1, 1)", "np.add.at(indptr, docs, 1)",
      "off-by-one", (READERS, BAD_INPUT, UCI)),
    M("jsonl-blank-lines-not-skipped", "topictk/corpus/readers.py",
      "if line is None or not line.strip():", "if line is None:",
      "dropped condition", (READERS, BAD_INPUT, PREPARE)),
    M("line-numbers-off-by-one", "topictk/corpus/readers.py",
      "        lineno = 0\n        for raw in stream:", "        lineno = 1\n        for raw in stream:",
      "off-by-one", (READERS, BAD_INPUT, PREPARE)),
    M("csr-indptr-off-by-one", "topictk/corpus/store.py",
      "np.add.at(indptr, rows + 1, 1)", "np.add.at(indptr, rows, 1)",
      "off-by-one", (STORE,)),
    M("vocab-max-df-off-by-one", "topictk/corpus/vocab.py",
      "(df <= _max_threshold(max_df, n_docs))", "(df < _max_threshold(max_df, n_docs))",
      "off-by-one", (TEXT_VOCAB, PREPARE)),
    M("tokenize-min-length-off-by-one", "topictk/corpus/text.py",
      "_LETTERS.findall(text.lower()) if len(t) >= min_length]",
      "_LETTERS.findall(text.lower()) if len(t) > min_length]",
      "off-by-one", (TEXT_VOCAB,)),
]

# mutations checked and judged equivalent (no test can kill them): id -> reason
EQUIVALENT: dict[str, str] = {}

# what earlier runs left alive, and the test added for each (kept in every report)
HISTORY = """\
## Survivors of earlier runs and the tests that kill them now

Before the list was written, ten hand-made mutations left four survivors; the tests added for
them, run alone against the mutation (`--only ID --tests TEST`), fail:

| mutation | killed by |
| --- | --- |
| `sgmcmc-exponent-halved`, `sgmcmc-step-constant` | `tests/unit/test_schedules.py` (hand-computed values; the logged epsilon); `tests/dmr/test_dmr.py::test_sgrld_step_equals_reference`, whose twin now takes eps_t from the formula and not from the code under test |
| `sgrld-rescaling-dropped` | `tests/minibatch/test_sgrld.py::test_driver_steps_equal_twin_with_the_batch_rescaling`; also `test_planted_topics_recovered`, whose bound is now 0.08 (correct runs 0.056-0.063, this mutation about 0.10) |
| `l2r-alpha-one` | `tests/kernels/test_left_to_right.py::test_document_log_likelihoods_equal_exact_values` (enumeration) |
| `sgrld-prior-alpha-one` | `tests/kernels/test_left_to_right.py::test_lda_family_runs_are_scored_with_their_alpha[sgrld]` |

The first runs of this list left four survivors; the tests added for them:

| mutation | why it survived | killed by |
| --- | --- | --- |
| `dlda-sgrld-noise-factor-two-dropped` | the SGRLD step of deep LDA was tested without noise only | `tests/dlda/test_updates.py::test_sgrld_dlda_step_equals_eq5_written_out` |
| `gibbs-sample-schedule-off-by-one` | no test looked at which sweeps give samples | `tests/kernels/test_gibbs_model.py::test_samples_are_collected_every_thin_sweeps_after_burn_in` |
| `jsonl-blank-lines-not-skipped` | no test had a blank line inside a JSON-lines file | `tests/unit/test_readers.py::test_jsonl_skips_blank_lines_and_names_documents_by_line` |
| `minibatch-thread-merge-index` | with two threads there is one private buffer, so its index is always 0 | `tests/minibatch/test_sgrld.py::test_local_gibbs_merges_every_thread_buffer` (three and four threads) |

Three later mutations were noticed by the golden-output tests only; the tests added for them:

| mutation | why it survived | killed by |
| --- | --- | --- |
| `hsvg-step-size-one-step-late` | the HSVG step test took rho_t from the driver's own state | `tests/minibatch/test_hsvg.py::test_step_sizes_follow_the_schedule_from_the_first_update` |
| `pem-alpha-from-particle-0` | every document's weights sum to 1, so particle 0's statistic has the weighted one's scale and alpha stays plausible | `tests/dmr/test_pem.py::test_learnt_alpha_is_the_newton_step_on_the_particle_weighted_statistic` |
| `coherence-on-diversity-top` | the only test of both settings gave them the same value | `tests/unit/test_evaluation.py::test_coherence_is_scored_on_the_coherence_top_words_not_the_diversity_top`, `::test_evaluate_scores_coherence_on_the_configured_top_words` |
"""

BUILD_OUTPUTS = ("*.c", "*.so")
IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".ruff_cache", ".pytest_cache", "build",
                                "*.egg-info", "runs", "stores", "work")


def _run(cmd: list[str], cwd: Path, timeout: float) -> tuple[int | None, str]:
    """(exit status or None on timeout, the last lines of the output)."""
    env = {**os.environ, "PYTHONPATH": str(cwd), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, ""
    lines = (done.stdout + done.stderr).strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return done.returncode, (failed[0] if failed else " | ".join(lines[-3:]))


def _build(copy: Path, timeout: float) -> tuple[int | None, str]:
    return _run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], copy, timeout)


def check_applies(mutations: list[Mutation], root: Path) -> list[str]:
    """Problems: mutations whose old text is missing or not unique."""
    problems = []
    for m in mutations:
        text = (root / m.path).read_text()
        n = text.count(m.old)
        if n != 1:
            problems.append(f"{m.id}: old text found {n} times in {m.path}")
    return problems


def make_copy(root: Path, where: Path, timeout: float) -> Path:
    try:
        import Cython  # noqa: F401  (the kernels of mutated .pyx files are rebuilt)
    except ImportError:
        raise SystemExit("the mutation check rebuilds kernels and needs Cython in this "
                         "environment: pip install 'cython>=3,<4'") from None
    copy = where / "repo"
    shutil.copytree(root, copy, ignore=IGNORE, symlinks=True)
    where_from = "import topictk.inference._heldout as g; print(g.__file__)"
    code, out = _run([sys.executable, "-c", where_from], copy, 60)
    if code != 0 or not out.startswith(str(copy)):
        print("building the kernels in the copy ...", flush=True)
        code, out = _build(copy, timeout)
        if code != 0:
            raise SystemExit(f"the kernels do not build in the copy: {out}")
        code, out = _run([sys.executable, "-c", where_from], copy, 60)
    if not out.startswith(str(copy)):
        raise SystemExit(f"the copy's tests would import topictk from {out}, not from {copy}")
    return copy


def run_one(m: Mutation, copy: Path, backup: Path, test_timeout: float,
            build_timeout: float) -> tuple[str, str, float]:
    """(status, detail, seconds); status is killed, survived, timeout (killed), stale or
    build-failed."""
    began = time.monotonic()
    target = copy / m.path
    original = target.read_text()
    stat = target.stat()
    if original.count(m.old) != 1:
        return "stale", f"old text found {original.count(m.old)} times", 0.0
    target.write_text(original.replace(m.old, m.new))
    try:
        if m.compiled:
            code, out = _build(copy, build_timeout)
            if code != 0:
                return "build-failed", out, time.monotonic() - began
        code, out = _run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                          *m.tests], copy, test_timeout)
        if code is None:
            return "timeout", f"tests ran over {test_timeout:.0f} s", time.monotonic() - began
        if code == 0:
            return "survived", out, time.monotonic() - began
        return "killed", out, time.monotonic() - began
    finally:
        target.write_text(original)
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        if m.compiled:       # the kernels as they were: no rebuild of the original needed
            for saved in backup.rglob("*"):
                if saved.is_file():
                    shutil.copy2(saved, copy / saved.relative_to(backup))


def save_build_outputs(copy: Path, backup: Path) -> None:
    for pattern in BUILD_OUTPUTS:
        for path in (copy / "topictk").rglob(pattern):
            dest = backup / path.relative_to(copy)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)


def write_report(path: Path, results: list[tuple[Mutation, str, str, float]]) -> None:
    killed = sum(status in ("killed", "timeout") for _, status, _, _ in results)
    lines = [
        "# Mutation check",
        "",
        f"**{killed} of {len(results)} mutations killed.**",
        "",
        ("Made by `python tests/mutation/run.py --report benchmarks/results/mutation.md` "
         "(see docs/testing.md). Each mutation is one exact text replacement in a copy of the "
         "repository, built where a kernel changed, and run against its own list of tests "
         "with `pytest -x`; the golden-output tests are in no list."),
        "",
        "| mutation | file | kind | result | seconds | first failing test |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for m, status, detail, seconds in results:
        first = detail.split(" - ")[0].removeprefix("FAILED ").removeprefix("ERROR ")
        shown = f"`{first}`" if status == "killed" and first.startswith("tests/") else ""
        lines.append(f"| `{m.id}` | `{m.path}` | {m.kind} | {status} | {seconds:.0f} | "
                     f"{shown} |")
    survivors = [(m, status, detail) for m, status, detail, _ in results
                 if status not in ("killed", "timeout")]
    lines += ["", "## Survivors", ""]
    if not survivors:
        lines.append("None.")
    for m, status, detail in survivors:
        reason = EQUIVALENT.get(m.id, detail)
        lines.append(f"- `{m.id}` ({status}): {reason}")
    total = sum(seconds for _, _, _, seconds in results)
    took = (f"The mutations took {total / 60:.0f} minutes in all ({os.cpu_count()} cores, "
            f"Python {platform.python_version()}).")
    lines += ["", took, "", HISTORY]
    path.write_text("\n".join(lines).rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run these mutations only")
    parser.add_argument("--quick", action="store_true", help="the short Python-only subset")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    parser.add_argument("--check", action="store_true",
                        help="check that every mutation applies to this checkout and stop")
    parser.add_argument("--tests", nargs="+", metavar="TEST",
                        help="run these tests (pytest ids) instead of each mutation's own list, "
                             "e.g. to see whether one test alone kills a mutation")
    parser.add_argument("--report", type=Path, help="write a Markdown report here")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds allowed for one mutation's tests (default 900)")
    parser.add_argument("--build-timeout", type=float, default=900,
                        help="seconds allowed for rebuilding a kernel (default 900)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = parser.parse_args(argv)

    chosen = MUTATIONS
    if args.only:
        unknown = set(args.only) - {m.id for m in MUTATIONS}
        if unknown:
            parser.error(f"unknown mutation id(s): {', '.join(sorted(unknown))}")
        chosen = [m for m in MUTATIONS if m.id in args.only]
    elif args.quick:
        chosen = [m for m in MUTATIONS if m.quick]
    if args.tests:
        chosen = [replace(m, tests=tuple(args.tests)) for m in chosen]
    if args.list:
        for m in chosen:
            print(f"{m.id:40s} {m.path:42s} {m.kind}")
        return 0
    problems = check_applies(chosen, ROOT)
    if args.check or problems:
        print("\n".join(problems) or f"all {len(chosen)} mutations apply")
        return 1 if problems else 0

    # compiled mutations last and grouped by file: the Python ones report first
    chosen = sorted(chosen, key=lambda m: (m.compiled, m.path if m.compiled else ""))
    where = Path(tempfile.mkdtemp(prefix="topictk-mutation-"))
    results = []
    try:
        copy = make_copy(ROOT, where, args.build_timeout)
        backup = where / "build-outputs"
        save_build_outputs(copy, backup)
        for i, m in enumerate(chosen, 1):
            status, detail, seconds = run_one(m, copy, backup, args.timeout, args.build_timeout)
            results.append((m, status, detail, seconds))
            print(f"[{i}/{len(chosen)}] {status:12s} {m.id} ({seconds:.0f} s)", flush=True)
            if status not in ("killed", "timeout"):
                print(f"    {detail}", flush=True)
    finally:
        if args.keep:
            print(f"copy kept in {where}")
        else:
            shutil.rmtree(where, ignore_errors=True)
    killed = sum(status in ("killed", "timeout") for _, status, _, _ in results)
    print(f"{killed} of {len(results)} mutations killed")
    if args.report:
        write_report(args.report, results)
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
