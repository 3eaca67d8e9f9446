# cython: language_level=3
"""Python access to the kernels' special functions, for tests and for drivers.

Equivalent to scipy.special.digamma / polygamma(1, .) / gammaln on positive arguments
(checked in tests/unit/test_special.py).
"""
import numpy as np

from topictk._cy.special cimport digamma, lngamma, trigamma


ctypedef double (*unary_t)(double) noexcept nogil


cdef object _elementwise(x, unary_t f):
    """``f`` of every element of ``x``, as a float64 array of x's shape."""
    cdef double[::1] a = np.ascontiguousarray(x, dtype=np.float64).ravel()
    out = np.empty(a.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    with nogil:
        for i in range(a.shape[0]):
            o[i] = f(a[i])
    return out.reshape(np.shape(x))


def psi(x):
    """Digamma of every element of ``x`` (x > 0)."""
    return _elementwise(x, digamma)


def psi1(x):
    """Trigamma of every element of ``x`` (x > 0)."""
    return _elementwise(x, trigamma)


def gammaln(x):
    """ln Gamma of every element of ``x`` (re-entrant lgamma_r)."""
    return _elementwise(x, lngamma)
