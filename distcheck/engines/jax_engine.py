"""JAX engine: ``jax.Array`` inputs, ``jax.vjp`` / ``jax.jvp`` / ``jax.vmap``, torch's gradcheck semantics.

What a torch user must know to read JAX through distcheck (each point verified on jax 0.10.2):

- **Which inputs are differentiated.** JAX arrays carry no ``requires_grad``: every float or
  complex ``jax.Array`` input is differentiated, integer arrays and other values are constants
  (close over a float array, or pass it as numpy, to hold it fixed). Every float/complex output
  is differentiated: an output cut off with ``jax.lax.stop_gradient`` is checked like the others
  (its analytical Jacobian is zero), where torch skips a detached output.
- **Complex numbers.** JAX's cotangents follow the other convention: ``jax.grad(lambda z:
  jnp.abs(z)**2)(1+2j)`` is ``2-4j``, torch's gradient ``2+4j``. For any function, torch's VJP
  of grad-output ``g`` is ``conj(vjp(conj(g)))`` with JAX's ``vjp`` (what
  ``jax.test_util.check_vjp`` also does); JVPs (tangents pushed forward) agree as they are.
  :meth:`JaxEngine.pullback` maps both ways, so every check reads torch's numbers; a
  ``jax.custom_vjp`` bwd written in torch's convention (without the conjugates) fails.
- **custom_vjp / custom_jvp.** A function takes a custom jvp *or* a custom vjp. JAX derives
  reverse mode from a custom jvp by transposing it, so a wrong ``custom_jvp`` is wrong in both
  modes; ``jax.jvp`` of a ``custom_vjp`` function raises ``TypeError: can't apply forward-mode
  autodiff (jvp) to a custom_vjp function`` (so ``check_forward_ad=True`` reports that error).
  JAX has no undefined grad-outputs: a bwd always receives zeros (the undefined-grad check is
  the zero grad-output check).
- **Randomness.** ``jax.random`` is a pure function of its key: a JAX function is deterministic
  unless it draws on the host (numpy's RNG, a callback) — then each eager VJP call reruns the
  bwd and the reentrancy check ("Backward is not reentrant") sees it; under ``jax.jit`` host
  randomness is a constant baked in at trace time. The batched checks' random vectors and
  gradgradcheck's grad-outputs come from numpy's global RNG (``np.random.seed`` reproduces
  them), fast mode's from a fixed-seed numpy generator.
- **jit.** Jitted functions are checked as they are (they trace once per input shape; the
  finite differences call them with moved values of the same shapes, so they compile once).
- **x64.** JAX computes in float32 unless ``jax.config.update("jax_enable_x64", True)`` ran at
  startup. distcheck never changes that on the caller's process: with x64 off the inputs are
  float32, checked as torch checks float32 inputs (they warn, and usually fail at the default
  eps/atol), and a warning names the switch. The mode is per process, and a float64 array
  unpickled in a process without x64 silently becomes float32: the mode is this engine's
  :meth:`JaxEngine.state`, which travels with a check to its Ray workers and is set there before
  the inputs are rebuilt. ``jax.custom_vjp`` objects do not unpickle: call them from a
  module-level function.
- **Threads.** XLA's CPU thread pool is sized when the backend starts: :meth:`JaxEngine.threads`
  changes nothing.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from distcheck.engines.base import Engine, TensorInfo
from distcheck.engines.registry import get_engine
from distcheck.engines.restricted import Restricted
from distcheck.engines.tuples import as_tuple
from distcheck.engines.wording import Wording
from distcheck.errors import GradcheckError
from distcheck.kinds import Fallback
from distcheck.numerics.random_vectors import unit_vectors

X64_OFF = (
    "JAX's 64-bit mode is off, so JAX arrays are float32/complex64 and gradcheck's default eps and "
    'tolerances do not suit them: run jax.config.update("jax_enable_x64", True) at startup '
    "(distcheck does not change JAX's global configuration)"
)


class JaxGradcheckError(GradcheckError):
    """A failed check of a JAX function."""


class JaxWording(Wording):
    """torch's messages; but whatever ``jax.vmap`` raises fails the batched checks: JAX reports a
    backward it cannot batch (``.item()``, a Python branch on a value) as a ``TypeError``
    (``ConcretizationTypeError``) where torch raises a RuntimeError."""

    def batched_error(self, error: Exception, forward: bool) -> str:
        note = self.batched_note(forward)
        return f"While computing batched gradients, got: {type(error).__name__}: {error}\n\n{note}"


def _is_inexact(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def _values_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype the checker sees: JAX's bfloat16 (an ml_dtypes type numpy does not compute
    with) is checked at float32."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if _is_inexact(dtype) and dtype.kind not in "fc" else dtype


class JaxEngine(Engine):
    """``jax.Array`` inputs, checked with torch's semantics (see the module's docstring)."""

    name = "jax"
    library, array_type = "jax", "Array"
    error_class = JaxGradcheckError
    wording = JaxWording()

    def state(self) -> dict[str, bool]:
        """JAX's 64-bit mode: a worker computes in the driver's precision (a float64 array
        unpickled with x64 off becomes float32)."""
        return {"jax_enable_x64": bool(jax.config.jax_enable_x64)}

    def restore(self, state: dict[str, bool]) -> None:
        for option, value in state.items():
            if getattr(jax.config, option) != value:
                jax.config.update(option, value)

    # -- describe and convert

    def info(self, value: Any, func: Callable | None = None, position: int | None = None) -> TensorInfo:
        dtype = _values_dtype(value.dtype)
        if position is not None and dtype in (np.float32, np.complex64) and not jax.config.jax_enable_x64:
            warnings.warn(X64_OFF, stacklevel=2)
        return TensorInfo.of(value.shape, dtype, f"jax.{np.dtype(value.dtype).name}", _is_inexact(value.dtype))

    def is_tensor(self, value: Any) -> bool:  # jax tracers too (vmapped closures, gradgradcheck's function)
        return isinstance(value, jax.Array)

    def to_numpy(self, value: Any) -> np.ndarray:
        values = np.array(value, copy=True)
        return values.astype(_values_dtype(values.dtype), copy=False)

    def from_numpy(self, array: np.ndarray, like: Any) -> Any:
        return jnp.asarray(array, dtype=like.dtype)

    # -- evaluate (functional: moved copies, the inputs are never changed)

    def call(self, func: Callable, inputs: tuple) -> tuple:
        return as_tuple(func(*inputs))

    def _outputs_at(self, func, inputs, position, moved: np.ndarray, outputs: Sequence[bool]) -> list:
        full = list(inputs)
        full[position] = jnp.asarray(moved, dtype=inputs[position].dtype)
        return [
            self.to_numpy(o) if want and self.is_tensor(o) else None
            for o, want in zip(self.call(func, tuple(full)), outputs)
        ]

    def perturbed_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        values = self.to_numpy(inputs[position])

        def evaluate(k: int, delta: complex) -> list[np.ndarray | None]:
            moved = values.copy()
            moved.reshape(-1)[k] = values.reshape(-1)[k] + delta
            return self._outputs_at(func, inputs, position, moved, outputs)

        return evaluate

    def direction_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        values = self.to_numpy(inputs[position])

        def evaluate(delta: np.ndarray) -> list[np.ndarray | None]:
            delta = np.asarray(delta)
            if np.iscomplexobj(delta) and values.dtype.kind != "c":
                raise ValueError(f"a complex direction for a real input ({values.dtype})")
            moved = values + delta.astype(values.dtype, copy=False).reshape(values.shape)
            return self._outputs_at(func, inputs, position, moved, outputs)

        return evaluate

    # -- differentiate

    def pullback(self, func, inputs, outputs, diff_positions, output_positions, create_graph=False):
        """``jax.vjp`` with torch's convention: ``conj(vjp(conj(g)))``; an undefined (None)
        grad-output is zeros. JAX's VJPs are differentiable as they are (``create_graph``)."""
        restricted = Restricted(func, inputs, diff_positions, output_positions)
        selected, vjp = jax.vjp(restricted, *(inputs[p] for p in diff_positions))

        def apply(cotangents: Sequence[Any]) -> list[Any]:
            given = tuple(jnp.zeros_like(o) if c is None else jnp.conj(c) for c, o in zip(cotangents, selected))
            return [jnp.conj(g) for g in vjp(given)]

        return apply

    def pushforward(self, func: Callable, inputs: tuple, diff_positions: Sequence[int]):
        """``jax.jvp``; an absent tangent is zeros; integer outputs have no tangent (None)."""
        restricted = Restricted(func, inputs, diff_positions, None)
        primals = tuple(inputs[p] for p in diff_positions)

        def apply(tangents: Sequence[Any]) -> list[Any]:
            given = tuple(jnp.zeros_like(x) if t is None else t for t, x in zip(tangents, primals))
            outputs, derivatives = jax.jvp(restricted, primals, given)
            return [d for o, d in zip(outputs, derivatives) if self.is_tensor(o) and _is_inexact(o.dtype)]

        return apply

    def vmap(self, function: Callable[[Any], tuple], stacked: Any) -> tuple:
        return tuple(jax.vmap(function)(stacked))

    def batch_evaluate(
        self, func: Callable, inputs: tuple, position: int, stacked: Any, *, loops: bool = False
    ) -> tuple:
        """``jax.vmap`` (strict by construction: no per-item fallback, ``loops`` or not; JAX's
        random numbers are explicit keys, which map like any input)."""
        args = list(inputs)
        args[position] = stacked
        in_axes = tuple(0 if k == position else None for k in range(len(args)))
        return as_tuple(jax.vmap(func, in_axes=in_axes)(*args))

    def batching_failure(self, error: Exception) -> Fallback:
        """A traced value read back (``float``, ``bool``, ``.item()``: a concretization error),
        a shape that depends on values (boolean indexing), or another vmap error."""
        name = type(error).__name__
        if "BooleanIndex" in name or "NonConcrete" in name:
            return Fallback.DYNAMIC_SHAPE
        if "Concretization" in name or "Tracer" in name:
            return Fallback.ITEM
        return super().batching_failure(error)

    def complex_part(self, value: Any, part: str) -> Any:
        if not (self.is_tensor(value) and jnp.iscomplexobj(value)):
            return value
        return jnp.real(value) if part == "real" else jnp.imag(value)

    def complex_join(self, part_value: Any, other: Any, part: str) -> Any:
        return jax.lax.complex(part_value, other) if part == "real" else jax.lax.complex(other, part_value)

    # -- random numbers: JAX has no global RNG; numpy's stands in for it

    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return unit_vectors(numels, dtypes)

    def rng_state(self):  # numpy's global RNG stands in for one (random_normal draws from it)
        return get_engine("numpy").rng_state()

    def set_rng_state(self, state) -> None:
        get_engine("numpy").set_rng_state(state)

    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return get_engine("numpy").random_normal(shapes, dtypes)  # numpy's global RNG, as torch.randn_like draws

    def random_grad_outputs(self, outputs: Sequence[Any], noncontiguous: bool) -> tuple:
        """Uniform in [-1, 1) from numpy's global RNG (JAX arrays have no strides: ``noncontiguous``
        changes nothing)."""
        made = []
        for o in outputs:
            values = np.random.uniform(-1, 1, o.shape)
            if jnp.iscomplexobj(o):
                values = values + 1j * np.random.uniform(-1, 1, o.shape)
            made.append(self.from_numpy(values, like=o))
        return tuple(made)

    # -- messages, threads

    def format_block(self, block: np.ndarray) -> str:
        body = np.array2string(block, separator=", ", prefix="Array(", threshold=1000, edgeitems=3)
        return f"Array({body}, dtype={block.dtype.name})"

    @contextlib.contextmanager
    def threads(self, n: int) -> Iterator[None]:
        """Nothing to do: XLA sizes its CPU pool once, when the backend starts."""
        yield
