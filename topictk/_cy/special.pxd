# Special functions usable under nogil and inside parallel regions (docs/algorithms.md §12.4).
from libc.math cimport log

cdef extern from "math.h" nogil:
    double lgamma_r(double x, int* sign)


cdef inline double lngamma(double x) noexcept nogil:
    """ln|Gamma(x)|, re-entrant (does not write the global signgam)."""
    cdef int sign
    return lgamma_r(x, &sign)


cdef inline double digamma(double x) noexcept nogil:
    """psi(x) for x > 0: shift to x >= 10, then the asymptotic series."""
    cdef double acc = 0.0
    cdef double inv, inv2
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    return (acc + log(x) - 0.5 * inv
            - inv2 * (1.0 / 12.0 - inv2 * (1.0 / 120.0 - inv2 * (1.0 / 252.0 - inv2 * (
                1.0 / 240.0 - inv2 * (1.0 / 132.0 - inv2 * (691.0 / 32760.0)))))))


cdef inline double trigamma(double x) noexcept nogil:
    """psi'(x) for x > 0: shift to x >= 12, then the asymptotic series."""
    cdef double acc = 0.0
    cdef double inv, inv2
    while x < 12.0:
        acc += 1.0 / (x * x)
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    return (acc + inv + 0.5 * inv2
            + inv * inv2 * (1.0 / 6.0 - inv2 * (1.0 / 30.0 - inv2 * (1.0 / 42.0 - inv2 * (
                1.0 / 30.0 - inv2 * (5.0 / 66.0))))))
