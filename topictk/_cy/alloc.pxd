# cython: language_level=3
"""The checked allocation every kernel uses, the allocation and freeing of an array of
buffers (one a thread) and the size of a buffer that holds any CSR row (inlined into each)."""
from libc.stdint cimport int64_t
from libc.stdlib cimport calloc, free, malloc


cdef inline void* checked_alloc(Py_ssize_t n, size_t size, bint zeroed=False) except NULL:
    """n items of ``size`` bytes (at least one, so that an empty array is not a failure),
    zeroed when asked; MemoryError when the allocation fails."""
    cdef size_t count = <size_t> (n if n > 0 else 1)
    cdef void* ptr = calloc(count, size) if zeroed else malloc(count * size)
    if ptr == NULL:
        raise MemoryError(f"cannot allocate {n} x {size} bytes")
    return ptr


cdef inline void free_rows(void** rows, Py_ssize_t n) noexcept nogil:
    """Free the n buffers of ``rows`` (an array of pointers, some possibly NULL, allocated
    zeroed so that an unfinished one holds NULLs) and the array itself; NULL is no-op."""
    cdef Py_ssize_t i
    if rows != NULL:
        for i in range(n):
            free(rows[i])
    free(rows)


cdef inline int alloc_rows(void*** rows, Py_ssize_t n, Py_ssize_t count, size_t size,
                           bint zeroed=False) except -1:
    """``*rows``: an array of n buffers (one a thread) of ``count`` items of ``size`` bytes,
    zeroed when asked. The array is stored, zeroed, before the first buffer is allocated, so
    that :func:`free_rows` frees whatever a failure left."""
    cdef Py_ssize_t i
    rows[0] = <void**> checked_alloc(n, sizeof(void*), True)
    for i in range(n):
        rows[0][i] = checked_alloc(count, size, zeroed)
    return 0


cdef inline Py_ssize_t longest_row(const int64_t* indptr, Py_ssize_t D) noexcept nogil:
    """The most entries of one of the D rows of CSR offsets ``indptr`` (at least 1): the size
    of a scratch buffer that holds any row."""
    cdef Py_ssize_t d, n = 1
    for d in range(D):
        if indptr[d + 1] - indptr[d] > n:
            n = indptr[d + 1] - indptr[d]
    return n
