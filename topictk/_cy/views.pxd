# cython: language_level=3
"""Optional array arguments of the kernels (None: not given): each checked against the shape
the call expects and bound to a pointer, NULL when it is None or empty (inlined into each)."""
from libc.stdint cimport int32_t

ctypedef fused item_t:
    double
    int32_t


cdef inline int bind_vector(item_t** out, item_t[::1] given, Py_ssize_t n,
                            str message) except -1:
    """``*out``: the first of the n entries of ``given``; ValueError(``message``) when it has
    another length."""
    out[0] = NULL
    if given is None:
        return 0
    if given.shape[0] != n:
        raise ValueError(message)
    if n > 0:
        out[0] = &given[0]
    return 0


cdef inline int bind_matrix(double** out, double[:, ::1] given, Py_ssize_t rows,
                            Py_ssize_t cols, str message) except -1:
    """``*out``: the first entry of the (rows, cols) matrix ``given``; ValueError(``message``)
    when it has another shape."""
    out[0] = NULL
    if given is None:
        return 0
    if given.shape[0] != rows or given.shape[1] != cols:
        raise ValueError(message)
    if rows > 0 and cols > 0:
        out[0] = &given[0, 0]
    return 0
