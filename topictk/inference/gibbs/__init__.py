"""Collapsed Gibbs sampling of LDA (docs/algorithms.md §2): the driver (``driver.py``, also the
template of sweep-based samplers such as ``dmr-sem``), its count representations
(``counts.py``; MH in ``mh.py``, WarpLDA's order in ``warp.py``), the sweeps on a Dask cluster
(``cluster.py``, ``shards.py``) and their kernels (``_gibbs``, ``_mh``, ``_warp``,
``_sparse_score``)."""
