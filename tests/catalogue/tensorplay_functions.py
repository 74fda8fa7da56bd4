"""The catalogue's functions as tensorplay autograd.Function classes (``WrongScale.apply``, ...)."""

from __future__ import annotations

import tensorplay

from tests.catalogue.functions import raises_value_error, threshold_select
from tests.catalogue.kits import TensorplayKit

__all__ = ["KIT", "raises_value_error", "threshold_select"]

KIT = TensorplayKit(tensorplay, __name__)
KIT.publish_all()
