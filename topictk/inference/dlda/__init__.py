"""Deep LDA, the Poisson-gamma belief network (docs/algorithms.md §8): its drivers and their
upward-downward kernels (``_dlda``)."""
