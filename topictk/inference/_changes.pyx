# cython: language_level=3
"""Integer count changes in few bytes, for the workers of a Dask cluster to send each other
(docs/cluster.md, "What travels").

A change new - old of int32 counts is written either dense, every entry in the smallest
signed integer type that holds them all, or sparse: its non-zero entries in order, each as
its gap from the previous one in the flattened array (one byte; a gap over MAX_GAP is bridged
by entries of value 0 every MAX_GAP positions) and its value in that type. ``change_stats``
gives what the choice needs in one pass; ``write_dense`` and ``write_sparse`` write the chosen
form in a second; ``add_sparse`` adds a sparse change to int32 counts. Equivalent to the NumPy
code of ``tests/reference/changes.py``.
"""
cimport cython
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t

ctypedef fused value_t:
    int8_t
    int16_t
    int32_t
    int64_t

cdef enum:
    MAX_GAP = 255       # the largest gap, a byte


@cython.boundscheck(False)
@cython.wraparound(False)
def change_stats(const int32_t[::1] new, const int32_t[::1] old):
    """(non-zero entries, bridging entries, smallest, largest value) of new - old; the
    values as int64 (a difference of two int32 counts may pass int32's range)."""
    cdef Py_ssize_t i, n = new.shape[0], last = -1
    cdef int64_t nnz = 0, bridges = 0, lo = 0, hi = 0, v
    if old.shape[0] != n:
        raise ValueError("new and old differ in size")
    with nogil:
        for i in range(n):
            v = <int64_t>new[i] - old[i]
            if v != 0:
                nnz += 1
                bridges += (i - last - 1) // MAX_GAP
                last = i
                if v < lo:
                    lo = v
                if v > hi:
                    hi = v
    return nnz, bridges, lo, hi


@cython.boundscheck(False)
@cython.wraparound(False)
def write_dense(const int32_t[::1] new, const int32_t[::1] old, value_t[::1] out):
    """out = new - old, entry by entry (every value fits ``out``'s type)."""
    cdef Py_ssize_t i, n = new.shape[0]
    if old.shape[0] != n or out.shape[0] != n:
        raise ValueError("new, old and out differ in size")
    with nogil:
        for i in range(n):
            out[i] = <value_t>(<int64_t>new[i] - old[i])


@cython.boundscheck(False)
@cython.wraparound(False)
def write_sparse(const int32_t[::1] new, const int32_t[::1] old, uint8_t[::1] gaps,
                 value_t[::1] values):
    """The sparse form of new - old into ``gaps`` and ``values``, sized by
    :func:`change_stats` (non-zero + bridging entries)."""
    cdef Py_ssize_t i, n = new.shape[0], last = -1, j = 0, gap
    cdef int64_t v
    if old.shape[0] != n or gaps.shape[0] != values.shape[0]:
        raise ValueError("arrays differ in size")
    with nogil:
        for i in range(n):
            v = <int64_t>new[i] - old[i]
            if v == 0:
                continue
            gap = i - last
            while gap > MAX_GAP:
                if j >= gaps.shape[0]:
                    with gil:
                        raise ValueError("gaps and values are too small for the change")
                gaps[j] = MAX_GAP
                values[j] = 0
                j += 1
                gap -= MAX_GAP
            if j >= gaps.shape[0]:
                with gil:
                    raise ValueError("gaps and values are too small for the change")
            gaps[j] = <uint8_t>gap
            values[j] = <value_t>v
            j += 1
            last = i
    if j != gaps.shape[0]:
        raise ValueError("gaps and values are larger than the change")


@cython.boundscheck(False)
@cython.wraparound(False)
def add_sparse(int32_t[::1] target, const uint8_t[::1] gaps, const value_t[::1] values):
    """target += the sparse change (``gaps``, ``values``)."""
    cdef Py_ssize_t j, m = gaps.shape[0], pos = -1, n = target.shape[0]
    if values.shape[0] != m:
        raise ValueError("gaps and values differ in size")
    with nogil:
        for j in range(m):
            pos += gaps[j]
            if pos >= n:
                with gil:
                    raise ValueError("the change reaches past the counts")
            target[pos] = <int32_t>(target[pos] + values[j])
