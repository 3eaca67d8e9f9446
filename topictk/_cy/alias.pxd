# Walker/Vose alias tables shared by the kernels (docs/algorithms.md §2.7, §2.9): the build
# and the draw contract, inlined into each kernel that cimports them.
from libc.stdint cimport int32_t


cdef inline void alias_build(const double* weight, Py_ssize_t n, double total, double* prob,
                              int32_t* alias, int32_t* small,
                              int32_t* large) noexcept nogil:
    """Vose's alias table of ``n`` weights summing to ``total``: entry j keeps itself with
    probability prob[j], else gives alias[j]. Small and large entries are stacks filled in
    index order and popped from the top, so the table is a pure function of the weights.
    ``small`` and ``large`` are scratch of n entries each."""
    cdef Py_ssize_t j, ns = 0, nl = 0
    cdef int32_t s, l
    for j in range(n):
        prob[j] = weight[j] * n / total
        alias[j] = <int32_t> j
        if prob[j] < 1.0:
            small[ns] = <int32_t> j
            ns += 1
        else:
            large[nl] = <int32_t> j
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        nl -= 1
        l = large[nl]
        alias[s] = l
        prob[l] = (prob[l] + prob[s]) - 1.0
        if prob[l] < 1.0:
            small[ns] = l
            ns += 1
        else:
            large[nl] = l
            nl += 1
    # what rounding leaves on either stack keeps itself
    while nl > 0:
        nl -= 1
        prob[large[nl]] = 1.0
    while ns > 0:
        ns -= 1
        prob[small[ns]] = 1.0


cdef inline Py_ssize_t alias_draw(double u, const double* prob, const int32_t* alias,
                                  Py_ssize_t n) noexcept nogil:
    """The alias draw contract: x = u n, j = min(floor(x), n - 1), j when x - j < prob[j]
    else alias[j] (one uniform)."""
    cdef double x = u * n
    cdef Py_ssize_t j = <Py_ssize_t> x
    if j > n - 1:
        j = n - 1
    if x - j < prob[j]:
        return j
    return alias[j]
