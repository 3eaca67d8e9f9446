"""Stochastic-gradient Riemannian Langevin dynamics for LDA (docs/algorithms.md §7): the driver,
on the mini-batch template of ``topictk/inference/minibatch.py`` (``dmr-sgrld`` extends it)."""
