# Random streams for kernels: NumPy bit generators used under nogil.
#
# A stream is a numpy.random.PCG64 created by the driver (topictk.streams); kernels
# receive the Python objects, take their bitgen_t pointers while holding the GIL, and then draw
# without it. A stream is used by one thread at a time (streams are keyed to data chunks).
from cpython.pycapsule cimport PyCapsule_GetPointer
from numpy.random cimport bitgen_t


cdef inline bitgen_t* bitgen_of(object bit_generator) except NULL:
    """The C handle of a NumPy bit generator (same stream as Generator.random())."""
    return <bitgen_t*> PyCapsule_GetPointer(bit_generator.capsule, "BitGenerator")


cdef inline double next_uniform(bitgen_t* gen) noexcept nogil:
    """U[0, 1): identical to numpy.random.Generator.random() on the same stream."""
    return gen.next_double(gen.state)


cdef inline Py_ssize_t search_cumulative(const double* cum, Py_ssize_t K,
                                         double u) noexcept nogil:
    """The cumulative draw contract: the smallest k with u < cum[k] (cum non-decreasing, u
    already scaled by the total); K - 1 if rounding leaves none."""
    cdef Py_ssize_t lo = 0, hi = K - 1, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if u < cum[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline int uniform_topic(bitgen_t* gen, int n_topics) noexcept nogil:
    """The uniform-topic draw contract: k = min(floor(u K), K - 1)."""
    cdef int k = <int> (next_uniform(gen) * n_topics)
    if k > n_topics - 1:
        k = n_topics - 1
    return k
