"""Inference algorithms: a registry and one driver (+ Cython kernel) per algorithm family."""
