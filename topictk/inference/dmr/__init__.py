"""Dirichlet-multinomial regression (docs/algorithms.md §9): ``dmr-sem`` on the Gibbs driver and
``dmr-sgrld`` on the SGRLD driver, with the kernel of the prior's objective (``_dmr``)."""
