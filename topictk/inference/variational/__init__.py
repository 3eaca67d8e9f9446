"""Variational inference of LDA (docs/algorithms.md §3-§6, §10): the family template
(``template.py``: the E-step, alpha's update, batch EM), batch VB (``vb.py``), collapsed VB
(``cvb.py``, its shards in ``cvb_shards.py``), particle EM (``pem.py``), online VB (``ovb.py``)
and the hybrid stochastic variational-Gibbs driver built on it (``hsvg.py``), with their kernels
(``_vb``, ``_cvb``, ``_pem``)."""
