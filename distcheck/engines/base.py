"""The engine interface: what the checker needs from an autodiff engine.

An engine adapts one array library (PyTorch, numpy with hand-written VJPs, tensorplay) to the
checker. The checker itself only sees numpy arrays and :class:`TensorInfo` records; every call
that touches engine tensors or runs engine autodiff goes through these methods.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from distcheck.numerics.finite_differences import Evaluate


@dataclass(frozen=True)
class TensorInfo:
    """What the planner and reducer know of one input or output tensor."""

    shape: tuple[int, ...]
    dtype: np.dtype  # numpy dtype of the values as the checker sees them
    dtype_name: str  # the engine's own name, for messages ("float64", "torch.float32", ...)
    is_complex: bool
    is_floating: bool
    requires_grad: bool
    is_double: bool = False  # float64 / complex128: what gradcheck's defaults are designed for
    overlapping: bool = False  # some dimension of size > 1 has stride 0
    elements: int | None = None  # a sparse tensor's specified values (what finite differences perturb)

    @property
    def perturbable(self) -> int:
        return self.numel if self.elements is None else self.elements

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_float_or_complex(self) -> bool:
        return self.is_floating or self.is_complex


class Engine(Protocol):
    """One autodiff engine. Implementations are picklable by name and stateless, but for the
    outputs :meth:`reference_call` may keep (per thread) until :meth:`forget`."""

    name: str
    error_class: type[Exception]  # GradcheckError subclass raised for this engine's checks

    def owns(self, value: Any) -> bool:
        """True if ``value`` is a tensor of this engine."""

    def is_tensor(self, value: Any) -> bool: ...

    def info(self, value: Any, func: Callable | None = None, position: int | None = None) -> TensorInfo:
        """Describe a tensor; ``func``/``position`` give the context for ``requires_grad``."""

    def check_outputs(self, outputs: tuple) -> None:
        """Reject outputs the checker cannot handle (e.g. sparse) with a clear error."""

    def call(self, func: Callable, inputs: tuple) -> tuple:
        """Evaluate ``func(*inputs)`` with gradients recorded; the outputs as a tuple."""

    def reference_call(self, func: Callable, inputs: tuple) -> tuple:
        """``call``, for the outputs that backward passes and checks differentiate: an engine
        may keep them (and their graph) and hand them out again for the same, unchanged inputs,
        as torch's gradcheck differentiates one call's outputs. Never for perturbed inputs."""

    def forget(self) -> None:
        """Drop what :meth:`reference_call` keeps (the end of a check)."""

    def output_part(self, func: Callable, part: str, n_inputs: int) -> Callable:
        """``func`` with ``real`` or ``imag`` applied to its complex outputs (picklable)."""

    def threads(self, n: int) -> AbstractContextManager:
        """Run the engine's math on ``n`` intra-op threads inside the context."""

    def input_part(self, func: Callable, inputs: tuple, part: str) -> tuple[Callable, tuple]:
        """Forward-mode checks of complex inputs: ``func`` as a function of the real or
        imaginary parts of its complex inputs (the other part held at its value), and those
        parts as new (real) inputs."""

    def perturbed_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]) -> Evaluate:
        """evaluate(k, delta): outputs (numpy copies, only where ``outputs[o]``) of ``func``
        with flat element k of ``inputs[position]`` replaced by ``x[k] + delta``; the input is
        restored afterwards."""

    def vjp(
        self, func: Callable, inputs: tuple, output_position: int, diff_positions: Sequence[int]
    ) -> Callable[[int | np.ndarray], list[np.ndarray | None]]:
        """Build the graph of ``func(*inputs)`` once; ``vjp(g)`` then gives the gradients of
        ``outputs[output_position]`` for grad-output ``g`` — an int j means one-hot at flat
        element j (a Jacobian row), an array is the whole grad-output — one per differentiable
        input (None where unused). The graph is kept between calls."""

    def element_rows(self, value: Any) -> np.ndarray | None:
        """For a sparse tensor, the flat dense index of each specified value, in the order
        ``perturbed_evaluator`` numbers them; None for a dense tensor (element k is flat index k)."""

    def densify(self, inputs: tuple) -> tuple | None:
        """The inputs with sparse tensors fully specified (zeros where unspecified), for
        finite differences of non-masked checks; None when no input is sparse."""

    def direction_evaluator(
        self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]
    ) -> Callable[[np.ndarray], list[np.ndarray | None]]:
        """evaluate(delta): outputs (numpy copies, only where ``outputs[o]``) of ``func`` with
        ``inputs[position]`` replaced by ``x + delta`` (``delta`` an array of the input's shape,
        complex for the imaginary direction of a complex input); the input restored afterwards.
        Fast mode's numerical Jacobian-vector products."""

    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        """Fast mode's random vectors u and v: one per entry, uniform in [0, 1), divided by its
        norm, drawn in order from a fresh generator with a fixed seed (so a check is
        deterministic and leaves the global RNG alone). The torch engine draws them exactly as
        torch.autograd.gradcheck does."""

    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        """Standard normal arrays from the engine's *global* RNG (as ``torch.randn_like``): the
        grad-outputs / tangents of the batched-gradient checks, drawn on the driver."""

    def jvp(
        self, func: Callable, inputs: tuple, diff_positions: Sequence[int]
    ) -> Callable[[int, int | np.ndarray], list[np.ndarray | None]]:
        """Forward-mode AD. ``jvp(k, t)``: the output tangents (one per float/complex output of
        ``func``; None where the output has no tangent) for tangent ``t`` on differentiable input
        ``k`` (index into ``diff_positions``) and zero tangents on the others; an int ``t`` means
        one-hot at that flat element (a Jacobian column). Raises EngineCapabilityError, naming
        what is missing, if the engine has no forward-mode AD."""

    def check_undefined_forward_grad(self, func: Callable, inputs: tuple, tangents: Sequence[np.ndarray]) -> None:
        """Raise ``error_class`` unless, for each differentiable input in turn, a materialized
        zero tangent and an absent tangent give the same output tangents (the other inputs
        carrying ``tangents``)."""

    def check_batched_grad(
        self, func: Callable, inputs: tuple, output_position: int, grad_outputs: Sequence[np.ndarray]
    ) -> None:
        """Raise ``error_class`` unless the VJPs of ``outputs[output_position]`` computed for the
        stacked ``grad_outputs`` in one vectorized (vmap) call equal separate calls."""

    def check_batched_forward_grad(
        self, func: Callable, inputs: tuple, position: int, tangents: Sequence[np.ndarray]
    ) -> None:
        """Raise ``error_class`` unless vmap'd JVPs for the stacked ``tangents`` on input
        ``position`` equal separate JVPs."""

    def check_zero_grad_output(self, func: Callable, inputs: tuple, masked: bool) -> None:
        """Raise ``error_class`` unless zero grad-outputs give zero grads of the right kind."""

    def check_undefined_grad(self, func: Callable, inputs: tuple) -> None:
        """Raise ``error_class`` unless backward accepts undefined (None) grad-outputs."""

    def grad_function(self, func: Callable, inputs: tuple, grad_outputs: tuple) -> tuple[Callable, tuple]:
        """gradgradcheck's derived function ``(inputs, grad_outputs) -> grads`` and its inputs."""

    def default_grad_outputs(self, func: Callable, inputs: tuple, noncontiguous: bool) -> tuple:
        """Random grad-outputs in [-1, 1] for gradgradcheck, one per differentiable output."""

    def format_block(self, block: np.ndarray) -> str:
        """A Jacobian block as the engine prints tensors."""
