"""The catalogue's functions as torch.autograd.Function classes (``WrongScale.apply``, ...)."""

from __future__ import annotations

import torch

from tests.catalogue.functions import raises_value_error, threshold_select
from tests.catalogue.kits import TorchKit

__all__ = ["KIT", "raises_value_error", "threshold_select"]

KIT = TorchKit(torch, __name__)
KIT.publish_all()
