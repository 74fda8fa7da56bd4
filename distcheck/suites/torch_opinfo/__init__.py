"""Suite ``torch-opinfo``: PyTorch's OpInfo database as PyTorch's gradient tests check it.

- ``suite.py``: enumeration and rebuilding of cases;
- ``status.py``: which tests PyTorch runs, skips or expects to fail;
- ``samples.py``: seeded, cached sample generation; ``fingerprint.py``: their fingerprints;
- ``calls.py``: a sample as gradcheck inputs, a function and the calls of each check kind;
- ``database.py``: op_db and the accepted op and dtype names.
"""

from distcheck.suites.torch_opinfo.suite import TorchOpInfoSuite

__all__ = ["TorchOpInfoSuite"]
