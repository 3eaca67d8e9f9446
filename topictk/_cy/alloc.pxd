# cython: language_level=3
"""The checked allocation every kernel uses, and the freeing of an array of buffers (inlined
into each)."""
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
