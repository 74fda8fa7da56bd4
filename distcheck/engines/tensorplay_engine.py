"""tensorplay engine: tensorplay tensors, tensorplay.autograd for VJPs, tensorplay.func.vmap for
batched gradients.

tensorplay (https://pypi.org/project/tensorplay) copies PyTorch's API; this adapter gives its
functions torch's gradcheck semantics without inheriting tensorplay's own gradcheck's defects
(its complex path, undefined grads, random vectors). tensorplay quirks handled here:

- ``tp.tensor(ndarray)`` and ``Tensor.numpy()`` share memory with numpy: every value that
  crosses the boundary is copied (:func:`to_numpy`, :func:`to_tensor`);
- ``Tensor.real``/``.imag`` are not differentiable: complex outputs are split with
  ``view_as_real(o).select(-1, k)``, which is;
- perturbations write through ``x.data``, which shares storage but not the version counter;
  a 0-d element view is written with ``copy_`` (complex Python scalars are rejected by setitem);
- ``repr`` of complex tensors prints no values and real reprs round small values to ``0.``:
  Jacobian blocks are formatted from numpy;
- ``tp.rand(generator=...)`` ignores its generator: fast mode's fixed-seed vectors are drawn
  with numpy;
- the intra-op thread pool can be sized only once per process (see :meth:`TensorplayEngine.threads`);
- there is no usable forward-mode AD (see :data:`NO_FORWARD_AD`);
- sparse tensorplay tensors exist but are not supported here yet (:data:`NO_SPARSE`).
"""

from __future__ import annotations

import contextlib
import importlib
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorplay as tp
from tensorplay.func import vmap

from distcheck.engines.base import TensorInfo
from distcheck.errors import EngineCapabilityError, GradcheckError
from distcheck.numerics.compare import allclose
from distcheck.numerics.random_vectors import unit_vectors

_TensorplayGradcheckError = importlib.import_module("tensorplay.autograd.gradcheck").GradcheckError

NO_FORWARD_AD = (
    "tensorplay {version} has no forward-mode AD that distcheck can check: "
    "tensorplay.autograd.forward_ad.make_dual returns a Python DualTensor that is not a tensorplay.Tensor "
    "(tensorplay ops such as tensorplay.sin reject it, and only a few arithmetic methods propagate tangents), "
    "and tensorplay.func.jvp is computed from the reverse-mode graph by double backward, not from forward-mode "
    "derivative formulas (it silently returns zero tangents for ops without a double backward, such as tanh, "
    "sigmoid and relu). Checking it would only re-check the backward pass. {what} needs forward-mode AD: "
    "pass {flag}=False for tensorplay functions."
)

NO_SPARSE = (
    "distcheck's tensorplay engine does not check sparse tensorplay inputs yet: pass them as dense tensors "
    "(x.to_dense()), or check the function with torch"
)

NO_DOUBLE_BACKWARD = (
    "tensorplay computed gradients that do not require grad although the grad-outputs do: the backward "
    "of an op in this function has no double backward in tensorplay (e.g. tanh, sigmoid, relu, conv2d), so "
    "gradgradcheck will find their derivatives missing"
)

BATCHED_GRAD_NOTE = """gradcheck or gradgradcheck failed while testing batched gradient computation: the
backward pass computed for a batch of grad-outputs in one tensorplay.func.vmap call differs from
separate calls, or vmap could not run it. To skip this test pass check_batched_grad=False. The usual
cause is an operation in the backward formula that has no batching rule in tensorplay ("Kernel not
found for op: ... on backend: VmapCPU")."""


# torch's wording (tensorplay follows the same convention: an undefined grad means zeros)
_UNDEFINED_NOTES = (
    'Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml" '
    "(PyTorch's; tensorplay follows the same convention: an undefined grad-output stands for zeros)"
)


class TensorplayGradcheckError(GradcheckError, _TensorplayGradcheckError):
    """A failed check of a tensorplay function: catchable as distcheck's or tensorplay's GradcheckError."""


def to_numpy(t: tp.Tensor) -> np.ndarray:
    """A numpy copy of a tensor's values (never a view of the tensor's memory)."""
    t = t.detach()
    if t.dtype == tp.bfloat16:  # numpy has no bfloat16: checked at float32
        t = t.to(tp.float32)
    return np.array(t.numpy(), copy=True)


def to_tensor(values: Any, dtype: Any = None) -> tp.Tensor:
    """A tensor holding a copy of ``values`` (``tp.tensor`` alone would alias numpy memory)."""
    return tp.tensor(np.array(values, copy=True, order="C"), dtype=dtype)


_numpy_dtypes: dict[Any, np.dtype] = {}


def numpy_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype of a tensorplay dtype's values (bfloat16 → float32)."""
    if dtype not in _numpy_dtypes:
        _numpy_dtypes[dtype] = np.dtype(to_numpy(tp.zeros((), dtype=dtype)).dtype)
    return _numpy_dtypes[dtype]


def tensorplay_dtype(dtype: np.dtype) -> Any:
    return getattr(tp, np.dtype(dtype).name)


def _writable_values(x: tp.Tensor) -> np.ndarray:
    """A numpy view of a tensor's memory (writes reach the tensor without bumping its version)."""
    if x.dtype == tp.bfloat16:
        raise EngineCapabilityError("finite differences of bfloat16 tensorplay inputs are not supported")
    values = x.data.numpy()
    if not values.flags.writeable:
        raise EngineCapabilityError(f"cannot perturb this tensorplay input in place ({tuple(x.shape)}, {x.dtype})")
    return values


def _is_sparse(value: Any) -> bool:
    return isinstance(value, tp.Tensor) and value.layout != tp.strided


def _differentiable(outputs: tuple) -> tuple:
    return tuple(o for o in outputs if isinstance(o, tp.Tensor) and o.requires_grad)


def _as_tuple(x) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _index(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Flat index ``k`` as a tuple of Python ints (tensorplay rejects numpy integers)."""
    return tuple(int(i) for i in np.unravel_index(k, shape)) if shape else ()


def _grad(outputs: Sequence, inputs: Sequence, grad_outputs: Sequence, **kwargs) -> tuple:
    """``tp.autograd.grad`` with ``allow_unused``; no outputs means no gradients (as in torch,
    where tensorplay raises)."""
    if not outputs:
        return (None,) * len(inputs)
    return tuple(tp.autograd.grad(list(outputs), list(inputs), list(grad_outputs), allow_unused=True, **kwargs))


class ComplexOutputPart:
    """``func`` with the real or imaginary part taken of its complex outputs.

    ``Tensor.real``/``.imag`` are not differentiable in tensorplay; ``view_as_real(o)`` is, and
    selecting its last dimension gives the torch-convention gradients (grad-output ``g`` of the
    real part reaches ``o`` as ``g``, of the imaginary part as ``1j·g``).
    """

    def __init__(self, func: Callable, part: str):
        self.func, self.part = func, part

    def __call__(self, *inputs):
        k = 0 if self.part == "real" else 1
        return tuple(
            tp.view_as_real(o).select(-1, k) if isinstance(o, tp.Tensor) and o.is_complex() else o
            for o in _as_tuple(self.func(*inputs))
        )


class ComplexInputPart:
    """``func`` as a function of the real or imaginary parts of its complex inputs, the other part
    held at its original value (``tp.complex`` rebuilds the inputs differentiably)."""

    def __init__(self, func: Callable, positions: tuple[int, ...], others: tuple, part: str):
        self.func, self.positions, self.others, self.part = func, positions, others, part

    def __call__(self, *inputs):
        full = list(inputs)
        for i, other in zip(self.positions, self.others):
            full[i] = tp.complex(inputs[i], other) if self.part == "real" else tp.complex(other, inputs[i])
        return _as_tuple(self.func(*full))


class GradOfOutputs:
    """gradgradcheck's function: ``(*inputs, *grad_outputs) -> d(outputs)/d(inputs)·grad_outputs``.

    The gradients are built with ``create_graph=True`` so that they can be differentiated
    again; unused inputs (None gradients) are left out, as torch's gradgradcheck does. A
    tensorplay op without a double backward returns gradients that do not require grad although
    the grad-outputs do: a warning says so, and gradcheck then reports that the numerical
    Jacobian of these gradients is not zero.
    """

    def __init__(self, func: Callable, n_inputs: int, diff_inputs: frozenset, diff_grad_outputs: frozenset):
        self.func, self.n_inputs = func, n_inputs
        self.diff_inputs, self.diff_grad_outputs = diff_inputs, diff_grad_outputs

    def __call__(self, *args):
        inputs = tuple(x.requires_grad_() if i in self.diff_inputs else x for i, x in enumerate(args[: self.n_inputs]))
        outputs = _differentiable(_as_tuple(self.func(*inputs)))
        grad_outputs = tuple(
            x.requires_grad_() if i in self.diff_grad_outputs else x for i, x in enumerate(args[self.n_inputs :])
        )
        wrt = tuple(x for i, x in enumerate(inputs) if i in self.diff_inputs)
        grads = tuple(g for g in _grad(outputs, wrt, grad_outputs, create_graph=True) if g is not None)
        if any(g.requires_grad for g in grad_outputs) and not all(g.requires_grad for g in grads):
            warnings.warn(NO_DOUBLE_BACKWARD, stacklevel=2)
        return grads


class UndefinedGrad(tp.autograd.Function):
    """Identity whose backward passes an undefined (None) grad on: torch's ``UndefinedGrad``."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return None


_thread_count_fixed = False  # tensorplay sizes its intra-op pool once per process


class TensorplayEngine:
    name = "tensorplay"
    error_class = TensorplayGradcheckError

    def owns(self, value: Any) -> bool:
        return isinstance(value, tp.Tensor)

    is_tensor = owns

    def info(self, value: tp.Tensor, func: Callable | None = None, position: int | None = None) -> TensorInfo:
        return TensorInfo(
            shape=tuple(value.shape),
            dtype=numpy_dtype(value.dtype),
            dtype_name=str(value.dtype),
            is_complex=value.is_complex(),
            is_floating=value.is_floating_point(),
            requires_grad=bool(value.requires_grad),
            is_double=value.dtype in (tp.float64, tp.complex128),
            # an empty tensor cannot overlap (tensorplay gives some of them all-zero strides)
            overlapping=not _is_sparse(value)
            and value.numel() > 0
            and any(st == 0 and sz > 1 for st, sz in zip(value.stride(), value.shape)),
        )

    def check_outputs(self, outputs: tuple) -> None:
        if any(o.layout != tp.strided for o in outputs):
            raise ValueError(
                "Sparse output is not supported at gradcheck yet. "
                "Please call to_dense() on the output of fn for gradcheck."
            )

    def call(self, func: Callable, inputs: tuple) -> tuple:
        with tp.enable_grad():
            return _as_tuple(func(*inputs))

    reference_call = call  # not shared: every check calls afresh (sharing is not verified for tensorplay)

    def forget(self) -> None:
        pass

    @contextlib.contextmanager
    def threads(self, n: int) -> Iterator[None]:
        """Run engine math on ``n`` intra-op threads — as far as tensorplay allows.

        tensorplay's thread pool can be sized only once per process (any later
        ``set_num_threads`` call, even with the current count, is ignored with a warning), so
        the count cannot be restored afterwards. The first call that asks for a count other
        than the current one sets it for the rest of the process; later calls change nothing.
        distcheck always asks for 1 thread per unit: Ray workers and the serial executor then
        both compute on one thread (reductions depend on the thread count, so this keeps their
        numbers bitwise identical), and a process that has already fixed its own count
        (``tp.set_num_threads``) keeps it.
        """
        global _thread_count_fixed
        if not _thread_count_fixed and tp.get_num_threads() != n:
            _thread_count_fixed = True
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Cannot set number of intraop threads")
                tp.set_num_threads(n)
        yield

    def output_part(self, func: Callable, part: str, n_inputs: int) -> Callable:
        return ComplexOutputPart(func, part)

    def input_part(self, func: Callable, inputs: tuple, part: str) -> tuple[Callable, tuple]:
        """``func`` of the ``part`` ("real"/"imag") of its complex inputs, and those parts (leaves
        requiring grad as the inputs did): forward-mode checks of complex inputs."""
        positions = tuple(i for i, x in enumerate(inputs) if isinstance(x, tp.Tensor) and x.is_complex())
        parts, others = list(inputs), []
        for i in positions:
            values = to_numpy(inputs[i])
            real, imag = (to_tensor(v) for v in (values.real, values.imag))
            parts[i] = (real if part == "real" else imag).requires_grad_(bool(inputs[i].requires_grad))
            others.append(imag if part == "real" else real)
        return ComplexInputPart(func, positions, tuple(others), part), tuple(parts)

    def element_rows(self, value: Any) -> None:
        if _is_sparse(value):
            raise EngineCapabilityError(NO_SPARSE)
        return None

    def densify(self, inputs: tuple) -> None:
        if any(_is_sparse(x) for x in inputs):
            raise EngineCapabilityError(NO_SPARSE)
        return None

    def _outputs_as_numpy(self, func: Callable, inputs: tuple, outputs: Sequence[bool]) -> list[np.ndarray | None]:
        return [
            to_numpy(o) if want and isinstance(o, tp.Tensor) else None
            for o, want in zip(self.call(func, inputs), outputs)
        ]

    def perturbed_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        values = _writable_values(inputs[position])
        shape = tuple(values.shape)

        def evaluate(k: int, delta: complex) -> list[np.ndarray | None]:
            index = np.unravel_index(k, shape)
            return self._outputs_moved(func, inputs, outputs, values, index, values[index] + delta)

        return evaluate

    def direction_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        x = inputs[position]
        values = _writable_values(x)

        def evaluate(delta: np.ndarray) -> list[np.ndarray | None]:
            delta = np.asarray(delta)
            if np.iscomplexobj(delta) and not x.is_complex():
                raise ValueError(f"a complex direction for a real input ({x.dtype})")
            moved = values + delta.astype(values.dtype, copy=False).reshape(values.shape)
            return self._outputs_moved(func, inputs, outputs, values, ..., moved)

        return evaluate

    def _outputs_moved(self, func, inputs, outputs, values: np.ndarray, index, moved) -> list[np.ndarray | None]:
        """The wanted outputs with ``values[index]`` (a numpy view of an input's memory) set to
        ``moved``, restored afterwards. The arithmetic is numpy's: tensorplay's is wrong on
        clones of permuted tensors."""
        original = np.array(values[index], copy=True)
        values[index] = moved
        try:  # copy the outputs before restoring: an output may be a view of the input
            return self._outputs_as_numpy(func, inputs, outputs)
        finally:
            values[index] = original

    def vjp(self, func: Callable, inputs: tuple, output_position: int, diff_positions: Sequence[int]):
        output = self.call(func, inputs)[output_position]
        wrt = [inputs[p] for p in diff_positions]
        shape, dtype = tuple(output.shape), numpy_dtype(output.dtype)

        def vjp(g: int | np.ndarray) -> list[np.ndarray | None]:
            if isinstance(g, (int, np.integer)):
                values = np.zeros(output.numel(), dtype=dtype)
                values[int(g)] = 1
            else:
                values = np.asarray(g, dtype=dtype)
            grad_output = to_tensor(values.reshape(shape), dtype=output.dtype)
            grads = _grad([output], wrt, [grad_output], retain_graph=True)
            return [None if g is None else to_numpy(g) for g in grads]

        return vjp

    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return unit_vectors(numels, dtypes)  # numpy's: tp.rand ignores its generator

    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        # tensorplay's global RNG (tp.manual_seed reproduces them), like torch.randn_like.
        return [to_numpy(tp.randn(tuple(shape), dtype=tensorplay_dtype(dtype))) for shape, dtype in zip(shapes, dtypes)]

    def jvp(self, func: Callable, inputs: tuple, diff_positions: Sequence[int]):
        raise EngineCapabilityError(self._no_forward_ad("Checking forward-mode derivatives", "check_forward_ad"))

    def check_undefined_forward_grad(self, func: Callable, inputs: tuple, tangents: Sequence[np.ndarray]) -> None:
        raise EngineCapabilityError(self._no_forward_ad("Checking undefined forward-mode tangents", "check_forward_ad"))

    def check_batched_forward_grad(
        self, func: Callable, inputs: tuple, position: int, tangents: Sequence[np.ndarray]
    ) -> None:
        raise EngineCapabilityError(
            self._no_forward_ad("Checking batched forward-mode gradients", "check_batched_forward_grad")
        )

    @staticmethod
    def _no_forward_ad(what: str, flag: str) -> str:
        return NO_FORWARD_AD.format(version=tp.__version__, what=what, flag=flag)

    def check_batched_grad(
        self, func: Callable, inputs: tuple, output_position: int, grad_outputs: Sequence[np.ndarray]
    ) -> None:
        output = self.call(func, inputs)[output_position]
        wrt = [x for x in inputs if isinstance(x, tp.Tensor) and x.requires_grad]

        def vjp(v):
            grads = _grad([output], wrt, [v], retain_graph=True)
            return tuple(
                tp.zeros((), dtype=x.dtype).expand(tuple(x.shape)) if g is None else g for g, x in zip(grads, wrt)
            )

        vectors = [to_tensor(np.asarray(g).reshape(tuple(output.shape)), dtype=output.dtype) for g in grad_outputs]
        expected = [np.stack([to_numpy(g) for g in shards]) for shards in zip(*(vjp(v) for v in vectors))]
        try:
            result = [to_numpy(r) for r in vmap(vjp)(tp.stack(vectors))]
        except Exception as ex:  # whatever vmap raised, the batched backward could not run
            raise self.error_class(
                f"While computing batched gradients, got: {type(ex).__name__}: {ex}{_missing_kernel(ex)}"
                f"\n\n{BATCHED_GRAD_NOTE}"
            ) from ex
        for position, (res, exp) in enumerate(zip(result, expected)):
            if res.shape != exp.shape or not allclose(res, exp, rtol=1e-5, atol=1e-8):
                raise self.error_class(
                    f"For output {output_position} and input {position}:\n\n{BATCHED_GRAD_NOTE}\n\n"
                    f"Got:\n{self.format_block(res)}\n\nExpected:\n{self.format_block(exp)}"
                )

    def check_zero_grad_output(self, func: Callable, inputs: tuple, masked: bool) -> None:
        fail = self.error_class
        outputs = _differentiable(self.call(func, inputs))
        wrt = [x for x in inputs if isinstance(x, tp.Tensor) and x.requires_grad]
        if not wrt:
            raise fail("no Tensors requiring grad found in input")
        grads = _grad(outputs, wrt, [tp.zeros_like(o) for o in outputs])
        for position, (g, x) in enumerate(zip(grads, wrt)):
            if g is None:
                continue
            values = to_numpy(g)
            is_zero = np.allclose(values, 0) if masked else not np.any(values != 0)  # NaN is nonzero
            if not is_zero:
                raise fail(
                    f"backward not multiplied by grad_output: a zero grad_output gave a nonzero "
                    f"gradient for differentiable input {position} (largest |value| {np.max(np.abs(values)):.3g})"
                )
            if g.dtype != x.dtype:
                hint = ""
                if g.is_complex() and not x.is_complex():
                    hint = ": tensorplay did not reduce the complex gradient of a real input to its real part"
                raise fail(f"grad is incorrect type ({g.dtype} for differentiable input {position} of {x.dtype}{hint})")
            if tuple(g.shape) != tuple(x.shape):
                raise fail(
                    f"grad is incorrect size ({tuple(g.shape)} for differentiable input {position} of {tuple(x.shape)})"
                )

    def check_undefined_grad(self, func: Callable, inputs: tuple) -> None:
        fail = self.error_class
        wrt = [x for x in inputs if isinstance(x, tp.Tensor) and x.requires_grad]
        if not wrt:
            raise fail("no Tensors requiring grad found in input")

        def differentiable_outputs() -> list:
            return list(_differentiable(self.call(func, inputs)))

        # All outputs' grads undefined at once, then (with several outputs) one at a time.
        cases = [("all output grads undefined", [UndefinedGrad.apply(o) for o in differentiable_outputs()])]
        if len(cases[0][1]) > 1:
            for k in range(len(cases[0][1])):
                outputs = differentiable_outputs()
                outputs[k] = UndefinedGrad.apply(outputs[k])
                cases.append((f"the grad of output {k} undefined", outputs))
        for label, outputs in cases:
            try:
                grads = _grad(outputs, wrt, [tp.zeros_like(o) for o in outputs])
            except Exception as e:
                raise fail(
                    f"Expected backward function to handle undefined output grads. {_UNDEFINED_NOTES}. With "
                    f"{label}, tensorplay's backward raised {type(e).__name__}: {e}"
                ) from e
            for position, g in enumerate(grads):
                if g is None:
                    continue
                values = to_numpy(g)
                if np.any(values != 0):
                    raise fail(
                        "Expected all input grads to be undefined or zero when all output grads are undefined "
                        f"or zero. {_UNDEFINED_NOTES}. With {label}, tensorplay's backward gave differentiable "
                        f"input {position} a nonzero gradient (largest |value| {np.max(np.abs(values)):.3g})"
                    )

    def grad_function(self, func: Callable, inputs: tuple, grad_outputs: tuple) -> tuple[Callable, tuple]:
        diff_inputs = frozenset(i for i, x in enumerate(inputs) if isinstance(x, tp.Tensor) and x.requires_grad)
        diff_grad_outputs = frozenset(
            i for i, g in enumerate(grad_outputs) if isinstance(g, tp.Tensor) and g.requires_grad
        )
        return GradOfOutputs(func, len(inputs), diff_inputs, diff_grad_outputs), inputs + grad_outputs

    def default_grad_outputs(self, func: Callable, inputs: tuple, noncontiguous: bool) -> tuple:
        """Uniform in [-1, 1) from tensorplay's global RNG, in each output's dtype (complex outputs
        get complex grad-outputs, both parts uniform)."""
        made = []
        for o in _differentiable(self.call(func, inputs)):
            dtype = numpy_dtype(o.dtype)
            real = tensorplay_dtype(np.empty(0, dtype=dtype).real.dtype)
            draws = to_numpy(tp.rand(tuple(o.shape) + ((2,) if o.is_complex() else ()), dtype=real)) * 2 - 1
            values = draws[..., 0] + 1j * draws[..., 1] if o.is_complex() else draws
            if noncontiguous and values.size > 1:  # every other element of a wider tensor
                wide = np.stack([values, np.zeros_like(values)], axis=-1)
                g = to_tensor(wide, dtype=o.dtype).select(-1, 0)
            else:
                g = to_tensor(values, dtype=o.dtype)
            made.append(g.requires_grad_())
        return tuple(made)

    def format_block(self, block: np.ndarray) -> str:
        """Like tensorplay's tensor repr, from numpy: tensorplay prints no values for complex
        tensors and rounds small real values to ``0.``."""
        body = np.array2string(block, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)
        suffix = "" if block.dtype == np.float32 else f", dtype={block.dtype.name.capitalize()}"
        return f"tensor({body}{suffix})"


def _missing_kernel(error: Exception) -> str:
    """A hint naming the op that has no vmap batching rule, when that is what failed."""
    match = re.search(
        r"Kernel not found for op: (\S+) on backend: Vmap|No native batch rule registered for (\S+)", str(error)
    )
    if match is None:
        return ""
    return f" (tensorplay has no batching rule for {match.group(1) or match.group(2)}, which this backward pass uses)"
