"""Suite ``tensorplay-opinfo``: PyTorch's OpInfo samples checked on tensorplay's functions of
the same names (tensorplay mirrors torch's API).

- ``suite.py``: enumeration and rebuilding of cases (torch-opinfo's ids, samples and options);
- ``status.py``: which tests run on tensorplay, and why the others are skipped;
- ``lookup.py``: an OpInfo's op, wrapper and output processing as tensorplay callables;
- ``translate.py``: OpInfo's Python helpers rebuilt with ``torch`` meaning ``tensorplay``;
- ``helpers.py``: tensorplay versions of the helpers that do not translate as they are;
- ``convert.py``: sample values from torch to tensorplay, through numpy;
- ``calls.py``: a converted sample as gradcheck inputs and a checked function;
- ``fingerprint.py``: fingerprints of converted samples;
- ``lapack.py``: tensorplay's LAPACK pinned to numpy's (scipy, imported by torch's OpInfo, would
  otherwise be taken).
"""

from distcheck.suites.tensorplay_opinfo.lapack import prefer_numpys_lapack

prefer_numpys_lapack()

from distcheck.suites.tensorplay_opinfo.suite import TensorplayOpInfoSuite  # noqa: E402

__all__ = ["TensorplayOpInfoSuite"]
