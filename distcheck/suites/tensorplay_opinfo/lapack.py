"""tensorplay's LAPACK pinned to numpy's bundled OpenBLAS.

tensorplay 1.0.0 looks for a LAPACK at its first linalg call, among the libraries loaded in the
process, and takes scipy's OpenBLAS (32-bit integers) when ``scipy.linalg`` or ``scipy.special``
was imported first — as torch's OpInfo database does whenever scipy is installed (jax installs
it). Every tensorplay linalg call then fails ("requires a LAPACK library"). Naming numpy's
64-bit-integer build in ``TP_LAPACK_LIB`` before the first call avoids it; a ``TP_LAPACK_LIB``
the user set is kept.
"""

from __future__ import annotations

import glob
import os

import numpy as np


def prefer_numpys_lapack() -> None:
    """Set ``TP_LAPACK_LIB`` to numpy's bundled ILP64 OpenBLAS, unless set or not found."""
    found = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "libscipy_openblas64_*.so*")))
    if found and "TP_LAPACK_LIB" not in os.environ:
        os.environ["TP_LAPACK_LIB"] = found[0]
