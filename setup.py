"""Build the Cython kernels.

Everything declarative lives in pyproject.toml; this file only makes the extension modules,
one per ``.pyx`` file found under ``topictk/``.
Set ``TOPICTK_DEBUG=1`` to build with bounds checks and without optimisation.
OpenMP is used when a compile probe finds it, otherwise the kernels run single-threaded.
The kernels are translated and compiled on every core this process may use (``-j N`` of
``build_ext`` sets another number of compile jobs).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("TOPICTK_DEBUG", "") not in ("", "0")

COMPILER_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": DEBUG,
    "nonecheck": False,
    "embedsignature": True,
}

ROOT = Path(__file__).resolve().parent


def _kernels() -> list[str]:
    """One extension module per kernel: every ``.pyx`` file under ``topictk/``, named by its
    path (``topictk/inference/gibbs/_gibbs.pyx`` -> ``topictk.inference.gibbs._gibbs``), so
    that a new kernel needs no line here."""
    return sorted(".".join(path.relative_to(ROOT).with_suffix("").parts)
                  for path in (ROOT / "topictk").rglob("*.pyx"))


KERNELS = _kernels()


def _cores() -> int:
    """The cores this process may run on (its affinity mask, which a container or ``taskset``
    may narrow), so that a build uses them all without oversubscribing."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def _openmp_flags() -> tuple[list[str], list[str]]:
    """Return (compile, link) flags for OpenMP if the compiler accepts them, else empty lists."""
    if os.environ.get("TOPICTK_NO_OPENMP"):
        return [], []
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        return [], []
    src = "#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp, "probe.c")
        c_file.write_text(src)
        try:
            result = subprocess.run(
                [cc, "-fopenmp", str(c_file), "-o", str(Path(tmp, "probe"))],
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return [], []
    if result.returncode != 0:
        print("topictk: OpenMP not found; kernels will be single-threaded", file=sys.stderr)
        return [], []
    return ["-fopenmp"], ["-fopenmp"]


def _extensions() -> list[Extension]:
    omp_compile, omp_link = _openmp_flags()
    opt = ["-O0", "-g"] if DEBUG else ["-O3"]
    random_lib = os.path.join(np.get_include(), "..", "..", "random", "lib")
    extensions = []
    for name in KERNELS:
        source = str(Path(*name.split(".")).with_suffix(".pyx"))
        extensions.append(
            Extension(
                name,
                [source],
                include_dirs=[np.get_include()],
                library_dirs=[random_lib],
                libraries=["npyrandom", "m"],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                extra_compile_args=opt + omp_compile,
                extra_link_args=omp_link,
            )
        )
    return cythonize(extensions, compiler_directives=COMPILER_DIRECTIVES, quiet=True,
                     nthreads=_cores())


# build_ext compiles one extension per job; the command line's -j N overrides this default
setup(ext_modules=_extensions(), options={"build_ext": {"parallel": _cores()}})
