"""The engine interface: the primitives an autodiff library must provide to be checked.

INTERFACE (what an adapter writes; everything else is written once, engine-neutral):

- describe and convert: :meth:`Engine.is_tensor`, :meth:`Engine.info`, :meth:`Engine.to_numpy`,
  :meth:`Engine.from_numpy`;
- evaluate: :meth:`Engine.call`, :meth:`Engine.perturbed_evaluator` (one element moved),
  :meth:`Engine.direction_evaluator` (the whole input moved along a direction);
- differentiate: :meth:`Engine.pullback` (VJP), :meth:`Engine.pushforward` (JVP),
  :meth:`Engine.vmap` (optional), :meth:`Engine.complex_part` / :meth:`Engine.complex_join`;
- batched Jacobian blocks (optional): :meth:`Engine.batch_evaluate`, with the hooks
  :meth:`Engine.batching_failure`, :meth:`Engine.transform_pullback`;
- random numbers: :meth:`Engine.random_unit_vectors`, :meth:`Engine.random_normal`,
  :meth:`Engine.random_grad_outputs`;
- :meth:`Engine.format_block`, :meth:`Engine.threads`; the attributes ``name``, ``error_class``
  and ``wording`` (a :class:`distcheck.engines.wording.Wording`: torch's messages by default).

Hooks, with defaults that suit a dense, functional library (override where the library differs):
:meth:`Engine.check_outputs`, :meth:`Engine.element_rows`, :meth:`Engine.densify`,
:attr:`Engine.shares_reference`, :meth:`Engine.version`, :meth:`Engine.requires_grad`,
:meth:`Engine.track`, :meth:`Engine.stack`, :meth:`Engine.grad_layout_error`,
:meth:`Engine.warm_up`, :meth:`Engine.library_version`, :meth:`Engine.state` /
:meth:`Engine.restore`; and the constructions :meth:`Engine.input_part`,
:meth:`Engine.output_part`, :meth:`Engine.output_parts`, :meth:`Engine.grad_function`, which
return None (the default: the engine-neutral construction is used) or the engine's own.

Values cross the interface in two forms: *engine values* (the library's own arrays, what the
checked function takes and returns, what the autodiff primitives consume and produce) and numpy
arrays (what the planner, the units and the reducer compute with). Nothing here mutates an
engine value except the two evaluators, which restore what they move; an immutable-array
library (JAX) implements them by building moved copies. "Undefined" grad-outputs and absent
tangents are ``None`` in the calls to the pullback / pushforward closures: a library without
such a notion maps ``None`` to zeros (that is what they stand for).

Written once on the primitives, as free functions of an engine (this module imports none of
them): Jacobian rows and columns (:mod:`distcheck.engines.derivatives`), the auxiliary checks
and gradgradcheck's function (:mod:`distcheck.engines.checks`), complex parts
(:mod:`distcheck.engines.complex_parts`), the shared reference call
(:mod:`distcheck.engines.reference`).

Registering an engine: :mod:`distcheck.engines.registry` (built in, an entry point of group
``distcheck.engines``, or ``register_engine``); ``tests/engines/toy_engine.py`` is a short
adapter from outside the package. ``part`` arguments are :class:`distcheck.kinds.Part` values
(str-valued: ``"real"`` / ``"imag"``).
"""

from __future__ import annotations

import importlib.metadata
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

from distcheck.engines.wording import Wording
from distcheck.errors import EngineCapabilityError
from distcheck.kinds import Fallback, Part
from distcheck.numerics.finite_differences import Evaluate

# pullback(cotangents) -> gradients: one cotangent per selected output (None: undefined), one
# gradient per differentiable input (None: the input is unused), all engine values
Pullback = Callable[[Sequence[Any]], list[Any]]
# pushforward(tangents) -> output tangents: one tangent per differentiable input (None: absent),
# one output tangent per float/complex output (None: it has none), all engine values
Pushforward = Callable[[Sequence[Any]], list[Any]]


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
    device: str | None = None  # where the values live, when the engine has devices (messages)

    @classmethod
    def of(cls, shape: Sequence[int], dtype: np.dtype, dtype_name: str, requires_grad: bool, **more: Any) -> TensorInfo:
        """The record of an array whose values have the numpy ``dtype`` (its kind and precision
        follow from it; an engine's bfloat16 is a float32 here, and not double)."""
        dtype = np.dtype(dtype)
        return cls(
            shape=tuple(shape),
            dtype=dtype,
            dtype_name=dtype_name,
            is_complex=dtype.kind == "c",
            is_floating=dtype.kind == "f",
            requires_grad=requires_grad,
            is_double=dtype in (np.float64, np.complex128),
            **more,
        )

    @property
    def perturbable(self) -> int:
        return self.numel if self.elements is None else self.elements

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_float_or_complex(self) -> bool:
        return self.is_floating or self.is_complex


class Engine(ABC):
    """One autodiff library. Instances are stateless and picklable by name (``get_engine``)."""

    name: str
    error_class: type[Exception]  # GradcheckError subclass raised for this engine's checks
    wording: Wording = Wording()  # the checks' messages (torch's unless the engine words them otherwise)
    # whether checks share one reference call's outputs (and graph) within a scope: see
    # :mod:`distcheck.engines.reference` (torch: True, as torch's gradcheck differentiates one call)
    shares_reference: bool = False
    # the top-level package of the arrays it checks, and the array class's name in it (an
    # installed engine's registry entry reads them: see :mod:`distcheck.engines.registry`)
    library: str | None = None
    array_type: str | None = None

    # -- describe and convert -----------------------------------------------------------------

    @abstractmethod
    def is_tensor(self, value: Any) -> bool:
        """True if ``value`` is an array of this engine (other values pass through untouched)."""

    @abstractmethod
    def info(self, value: Any, func: Callable | None = None, position: int | None = None) -> TensorInfo:
        """Describe an array; ``func``/``position`` give the context for ``requires_grad`` (an
        engine whose arrays carry no such flag decides from the function, or from the dtype)."""

    @abstractmethod
    def to_numpy(self, value: Any) -> np.ndarray:
        """A numpy copy of an array's values (dense; never a view of engine memory that could change)."""

    @abstractmethod
    def from_numpy(self, array: np.ndarray, like: Any) -> Any:
        """An engine array with ``array``'s values and shape and ``like``'s dtype (and device). It
        may share memory with ``array``: the caller does not modify ``array`` afterwards."""

    def shape(self, value: Any) -> tuple[int, ...]:
        """An array's shape (default: from :meth:`info`; an engine may read it more cheaply:
        the checks ask for it in every evaluation of gradgradcheck's function)."""
        return self.info(value).shape

    def zeros_like(self, value: Any) -> Any:
        """An engine array of (positive) zeros with ``value``'s shape and dtype, dense (default:
        through numpy)."""
        info = self.info(value)
        return self.from_numpy(np.zeros(info.shape, dtype=info.dtype), like=value)

    # -- evaluate -------------------------------------------------------------------------------

    @abstractmethod
    def call(self, func: Callable, inputs: tuple) -> tuple:
        """``func(*inputs)`` with gradients recorded (if the engine records); the outputs as a tuple."""

    @abstractmethod
    def perturbed_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]) -> Evaluate:
        """evaluate(k, delta): the outputs (numpy copies, only where ``outputs[o]``) of ``func``
        with flat element k of ``inputs[position]`` replaced by ``x[k] + delta`` (a complex
        delta for the imaginary direction of a complex input). ``inputs`` must look unchanged
        afterwards (an in-place engine restores the element; a functional one builds a copy)."""

    @abstractmethod
    def direction_evaluator(
        self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]
    ) -> Callable[[np.ndarray], list[np.ndarray | None]]:
        """evaluate(delta): the outputs (numpy copies, only where ``outputs[o]``) of ``func`` with
        ``inputs[position]`` replaced by ``x + delta`` (``delta`` an array of the input's shape,
        complex for the imaginary direction of a complex input): fast mode's numerical
        Jacobian-vector products. ``inputs`` look unchanged afterwards."""

    # -- differentiate ---------------------------------------------------------------------------

    @abstractmethod
    def pullback(
        self,
        func: Callable,
        inputs: tuple,
        outputs: tuple,
        diff_positions: Sequence[int],
        output_positions: Sequence[int],
        create_graph: bool = False,
    ) -> Pullback:
        """The VJP of ``func`` at ``inputs``: ``pullback(cotangents)`` gives, for one cotangent per
        output in ``output_positions`` (engine arrays of the outputs' shapes and dtypes, or None
        for an *undefined* grad-output: torch's ``UndefinedGrad``, zeros where the library has no
        such notion), the gradients of the inputs at ``diff_positions`` (None where an input is
        unused; a library that always gives arrays gives zeros). ``outputs`` are the outputs of
        one :meth:`call` at ``inputs`` (a graph-recording engine differentiates them; a
        functional one may ignore them and trace ``func`` itself). The closure may be called
        many times (the graph is kept), and inside :meth:`vmap`. ``create_graph``: the gradients
        must themselves be differentiable (gradgradcheck). Cotangents of complex outputs follow
        torch's convention (conjugate Wirtinger: ``grad = dL/dRe + i·dL/dIm``)."""

    def pushforward(self, func: Callable, inputs: tuple, diff_positions: Sequence[int]) -> Pushforward:
        """Forward-mode AD of ``func`` at ``inputs``: ``pushforward(tangents)``, one tangent per
        input at ``diff_positions`` (engine arrays, None for an absent tangent), gives one output
        tangent per float/complex output (None where an output has none). Usable inside
        :meth:`vmap`. Raises EngineCapabilityError (naming what is missing) if the engine has
        no forward-mode AD — the default."""
        raise EngineCapabilityError(f"the {self.name} engine has no forward-mode AD")

    def vmap(self, function: Callable[[Any], tuple], stacked: Any) -> tuple:
        """``function`` (engine array -> tuple of engine arrays) mapped over the first dimension
        of ``stacked`` in one vectorized call; the stacked results. Raises EngineCapabilityError
        when the engine has no vectorizing map — the default. Other exceptions are the check's
        failure (the batched checks report them with :meth:`Wording.batched_error`)."""
        raise EngineCapabilityError(f"the {self.name} engine has no vectorizing map (vmap): batched checks need one")

    # -- batched Jacobian blocks (optional: without them, every block is computed element by element)

    def batch_evaluate(
        self, func: Callable, inputs: tuple, position: int, stacked: Any, *, loops: bool = False
    ) -> tuple:
        """``func`` at each of the ``stacked`` values of ``inputs[position]`` (along the first
        dimension; the other inputs as they are) in one call of the engine's vectorizing map,
        recording no gradients: the stacked outputs. Strict: raises where the batch would not
        compute what separate calls compute (a value read back, data-dependent shapes), and on
        an operation without a batching rule unless ``loops`` (then, where the engine can, that
        operation alone runs item by item inside the batch); :meth:`batching_failure` names
        why. Random numbers are drawn once for the batch (a batch that moves the engine's
        global RNG is refused). Default: EngineCapabilityError."""
        raise EngineCapabilityError(f"the {self.name} engine has no vectorizing map (vmap)")

    def batching_failure(self, error: Exception) -> Fallback:
        """Why :meth:`batch_evaluate` or :meth:`vmap` raised ``error``. Default: a vmap error."""
        return Fallback.NO_VMAP if isinstance(error, EngineCapabilityError) else Fallback.VMAP_ERROR

    def transform_pullback(self, func: Callable, inputs: tuple, diff_positions, output_positions) -> Pullback:
        """:meth:`pullback` (no undefined cotangents, no ``create_graph``) as a function
        transform that :meth:`batch_evaluate` can map. Default: :meth:`pullback` of a fresh
        call (a functional engine's is one)."""
        outputs = self.call(func, inputs)
        return self.pullback(func, inputs, outputs, diff_positions, output_positions)

    @abstractmethod
    def complex_part(self, value: Any, part: Part) -> Any:
        """The ``"real"`` or ``"imag"`` part of a complex array, differentiably, with torch's
        convention: a grad-output ``g`` of the real part reaches ``value`` as ``g``, of the
        imaginary part as ``1j·g``."""

    @abstractmethod
    def complex_join(self, part_value: Any, other: Any, part: Part) -> Any:
        """The complex array whose ``part`` is ``part_value`` (differentiably) and whose other part
        is ``other`` (a constant)."""

    # -- random numbers --------------------------------------------------------------------------

    @abstractmethod
    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        """Fast mode's random vectors u and v: one per entry, uniform in [0, 1), divided by its
        norm, drawn in order from a fresh generator with a fixed seed (deterministic; the global
        RNG is left alone). ``distcheck.numerics.random_vectors.unit_vectors`` is a numpy version."""

    @abstractmethod
    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        """Standard normal arrays from the engine's *global* RNG (as ``torch.randn_like``): the
        grad-outputs / tangents of the batched-gradient checks, drawn on the driver."""

    @abstractmethod
    def random_grad_outputs(self, outputs: Sequence[Any], noncontiguous: bool) -> tuple:
        """gradgradcheck's default grad-outputs: one engine array per (differentiable) output,
        uniform in [-1, 1) from the engine's global RNG, of the output's shape and dtype (complex
        outputs: both parts uniform), differentiable; ``noncontiguous``: laid out with gaps,
        where the engine has strides."""

    # -- messages and threads -------------------------------------------------------------------

    @abstractmethod
    def format_block(self, block: np.ndarray) -> str:
        """A numpy block (of a Jacobian, of batched gradients) as the engine prints arrays."""

    @abstractmethod
    def threads(self, n: int) -> AbstractContextManager:
        """Run the engine's math on ``n`` intra-op threads inside the context."""

    # -- hooks, with defaults ----------------------------------------------------------------------

    def warm_up(self) -> None:
        """Make the library's slow first calls now (a Ray worker's warm-up, and the driver's
        meanwhile), not in a check's first task or its timed cost measurement. Default: none."""
        return None

    def library_version(self) -> str | None:
        """The version of the library this engine checks (a run records it; a resume must
        find the same). Default: the installed distribution named :attr:`library`, None if
        there is none."""
        if self.library is None:
            return None
        try:
            return importlib.metadata.version(self.library)
        except importlib.metadata.PackageNotFoundError:
            return None

    def state(self) -> Any:
        """The library's process-wide settings a check's numbers depend on, picklable (JAX: its
        64-bit mode): sent with a check to Ray workers, which :meth:`restore` it before they
        rebuild the inputs. Default: None (nothing)."""
        return None

    def restore(self, state: Any) -> None:
        """Apply a :meth:`state` taken in another process (a worker's copy of the driver's)."""
        return None

    def rng_state(self) -> Any:
        """The global RNG's state (the one :meth:`random_normal` draws from), for
        :meth:`set_rng_state`. Default: None (an engine without a global RNG)."""
        return None

    def set_rng_state(self, state: Any) -> None:
        """Put the global RNG back in a state :meth:`rng_state` returned."""
        return None

    def check_outputs(self, outputs: tuple) -> None:
        """Reject outputs the checker cannot handle (e.g. sparse) with a clear error. Default: all pass."""
        return None

    def element_rows(self, value: Any) -> np.ndarray | None:
        """For a sparse array, the flat dense index of each specified value, in the order
        :meth:`perturbed_evaluator` numbers them; None for a dense array (the default)."""
        return None

    def densify(self, inputs: tuple) -> tuple | None:
        """The inputs with sparse arrays fully specified, for finite differences of non-masked
        checks; None when no input is sparse (the default)."""
        return None

    def stack(self, values: Sequence[Any]) -> np.ndarray:
        """The separate results of a batched check, stacked (numpy), to compare with the vmapped
        ones. Default: numpy's stack of their values; an engine whose own stack rejects some arrays
        (torch: sparse CSR) stacks with it, so that the check fails as the reference does."""
        return np.stack([self.to_numpy(v) for v in values])

    def version(self, value: Any) -> Any:
        """A token that changes when ``value`` is modified in place (torch's version counter):
        the shared reference call is reused only for unchanged inputs. Default: None (arrays
        that cannot change)."""
        return None

    def requires_grad(self, value: Any, func: Callable | None = None, position: int | None = None) -> bool:
        """Whether ``value`` (any input or output) is differentiated: ``info(...).requires_grad`` of
        this engine's arrays, False for anything else. A hook because checks ask it often."""
        return self.is_tensor(value) and self.info(value, func, position).requires_grad

    def track(self, value: Any) -> Any:
        """``value`` made differentiable for the calls that follow (torch: ``requires_grad_()``,
        needed where a forward-mode dual arrives detached); default: ``value`` itself."""
        return value

    def grad_layout_error(self, grad: Any, value: Any) -> str | None:
        """The zero-grad-output check's layout complaint about the gradient ``grad`` of input
        ``value`` (torch: sparse layouts and dimensions), or None. Default: None."""
        return None

    def input_part(self, func: Callable, inputs: tuple, part: Part) -> tuple[Callable, tuple] | None:
        """``func`` as a function of the ``part`` of its complex inputs (forward-mode checks of
        complex inputs), and those parts as new inputs; None (the default): built on
        :meth:`complex_part` and :meth:`complex_join` (:func:`distcheck.engines.complex_parts.input_part`)."""
        return None

    def output_part(self, func: Callable, part: Part, n_inputs: int) -> Callable | None:
        """``func`` with its complex outputs replaced by their ``part`` (picklable); None (the
        default): built on :meth:`complex_part` (:func:`distcheck.engines.complex_parts.output_part`)."""
        return None

    def output_parts(self, func: Callable, parts: tuple[Part, ...]) -> Callable | None:
        """``func`` with each output replaced by its ``parts``, part after part (``len(parts)``
        times as many outputs, each the value :meth:`output_part` gives): finite differences of
        every part from one evaluation. Only evaluated, never differentiated. None (the
        default): built on :meth:`complex_part`."""
        return None

    def grad_function(self, func: Callable, inputs: tuple, grad_outputs: tuple) -> tuple[Callable, tuple] | None:
        """gradgradcheck's derived function ``(*inputs, *grad_outputs) -> grads`` and its inputs;
        None (the default): built on :meth:`pullback` with ``create_graph``
        (:func:`distcheck.engines.checks.grad_function`)."""
        return None
