"""An example library of custom autograd Functions, with its gradient checks as a distcheck suite."""

from distcheck_example_functions.functions import Cube, Hypot, MatMulAdd, RoundSTE, ScaledTanh

__all__ = ["Cube", "Hypot", "MatMulAdd", "RoundSTE", "ScaledTanh"]
