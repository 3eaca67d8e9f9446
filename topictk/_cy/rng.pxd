# Random streams for kernels: NumPy bit generators used under nogil.
#
# A stream is a numpy.random.PCG64 created by the driver (topictk.streams); kernels
# receive the Python objects, take their bitgen_t pointers while holding the GIL, and then draw
# without it. A stream is used by one thread at a time (streams are keyed to data chunks).
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport int64_t, uint64_t
from numpy.random cimport bitgen_t


cdef inline bitgen_t* bitgen_of(object bit_generator) except NULL:
    """The C handle of a NumPy bit generator (same stream as Generator.random())."""
    return <bitgen_t*> PyCapsule_GetPointer(bit_generator.capsule, "BitGenerator")


cdef inline double next_uniform(bitgen_t* gen) noexcept nogil:
    """U[0, 1): identical to numpy.random.Generator.random() on the same stream."""
    return gen.next_double(gen.state)


cdef struct Xoshiro:
    # xoshiro256+ (Blackman & Vigna 2021): a generator a kernel seeds from its stream and keeps
    # in a local, so that a draw is a few inlined instructions instead of a call through the
    # bit generator (docs/algorithms.md §12.3)
    uint64_t s0
    uint64_t s1
    uint64_t s2
    uint64_t s3


cdef inline void xoshiro_seed(Xoshiro* x, bitgen_t* gen) noexcept nogil:
    """The state: the next four 64-bit outputs of ``gen`` (``random_raw(4)``); s0 = 1 when all
    four are zero, the one state xoshiro256+ cannot leave."""
    x.s0 = gen.next_uint64(gen.state)
    x.s1 = gen.next_uint64(gen.state)
    x.s2 = gen.next_uint64(gen.state)
    x.s3 = gen.next_uint64(gen.state)
    if (x.s0 | x.s1 | x.s2 | x.s3) == 0:
        x.s0 = 1


cdef inline uint64_t xoshiro_next(Xoshiro* x) noexcept nogil:
    """The next 64-bit output, s0 + s3, then the state advanced."""
    cdef uint64_t out = x.s0 + x.s3
    cdef uint64_t t = x.s1 << 17
    x.s2 ^= x.s0
    x.s3 ^= x.s1
    x.s1 ^= x.s2
    x.s0 ^= x.s3
    x.s2 ^= t
    x.s3 = (x.s3 << 45) | (x.s3 >> 19)
    return out


cdef inline double xoshiro_uniform(Xoshiro* x) noexcept nogil:
    """U[0, 1) on a 2^-53 grid: the top 53 bits of the next output."""
    # below 2^53 the value fits int64, whose conversion is one instruction
    return <double> <int64_t> (xoshiro_next(x) >> 11) * (1.0 / 9007199254740992.0)


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
