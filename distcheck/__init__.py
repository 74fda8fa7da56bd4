"""distcheck: torch-exact gradient checks, cut into independent units and run serially or on Ray.

import distcheck
distcheck.gradcheck(fn, inputs)                  # drop-in for torch.autograd.gradcheck
distcheck.gradcheck(fn, inputs, executor="ray")  # the same check, spread over Ray workers
"""

from distcheck.api import gradcheck, gradgradcheck
from distcheck.engines.numpy_engine import NumpyFunction, numpy_function
from distcheck.errors import EngineCapabilityError, GradcheckError
from distcheck.options import Batching
from distcheck.reduce.counts import BatchCounts

__all__ = [
    "BatchCounts",
    "Batching",
    "EngineCapabilityError",
    "GradcheckError",
    "NumpyFunction",
    "gradcheck",
    "gradgradcheck",
    "numpy_function",
]
__version__ = "0.1.0"
