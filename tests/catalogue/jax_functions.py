"""The catalogue's functions as JAX functions (``jax.custom_vjp`` / ``jax.custom_jvp``: ``WrongScale(x)``, ...)."""

from __future__ import annotations

import jax.numpy

from tests.catalogue.functions import raises_value_error, threshold_select
from tests.catalogue.kits import JaxKit

__all__ = ["KIT", "raises_value_error", "threshold_select"]

KIT = JaxKit(jax.numpy, __name__)
KIT.publish_all()
