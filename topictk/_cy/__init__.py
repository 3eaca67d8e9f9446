"""Shared Cython declarations (random streams, special functions) for the kernels."""
