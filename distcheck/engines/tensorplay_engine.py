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
- there is no usable forward-mode AD (see :data:`~distcheck.engines.tensorplay_wording.NO_FORWARD_AD`);
- sparse tensorplay tensors exist but are not supported here yet (:data:`NO_SPARSE`).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorplay as tp
from tensorplay.func import vmap

from distcheck.engines.base import Engine, TensorInfo
from distcheck.engines.checks import GradOfOutputs
from distcheck.engines.complex_parts import ComplexOutputPart
from distcheck.engines.restricted import Restricted
from distcheck.engines.tensorplay_wording import TensorplayWording
from distcheck.engines.tuples import as_tuple
from distcheck.errors import EngineCapabilityError, GradcheckError
from distcheck.kinds import Part
from distcheck.numerics.random_vectors import unit_vectors

__all__ = ["ComplexOutputPart", "GradOfOutputs", "TensorplayEngine", "to_numpy", "to_tensor"]

_TensorplayGradcheckError = importlib.import_module("tensorplay.autograd.gradcheck").GradcheckError

NO_SPARSE = (
    "distcheck's tensorplay engine does not check sparse tensorplay inputs yet: pass them as dense tensors "
    "(x.to_dense()), or check the function with torch"
)

NO_DOUBLE_BACKWARD = (
    "tensorplay computed gradients that do not require grad although the grad-outputs do: the backward "
    "of an op in this function has no double backward in tensorplay (e.g. tanh, sigmoid, relu, conv2d), so "
    "gradgradcheck will find their derivatives missing"
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


def _index(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Flat index ``k`` as a tuple of Python ints (tensorplay rejects numpy integers)."""
    return tuple(int(i) for i in np.unravel_index(k, shape)) if shape else ()


def _grad(outputs: Sequence, inputs: Sequence, grad_outputs: Sequence, **kwargs) -> tuple:
    """``tp.autograd.grad`` with ``allow_unused``; no outputs means no gradients (as in torch,
    where tensorplay raises)."""
    if not outputs:
        return (None,) * len(inputs)
    return tuple(tp.autograd.grad(list(outputs), list(inputs), list(grad_outputs), allow_unused=True, **kwargs))


class UndefinedGrad(tp.autograd.Function):
    """Identity whose backward passes an undefined (None) grad on: torch's ``UndefinedGrad``."""

    @staticmethod
    def backward(ctx, grad):
        return None

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone()


_thread_count_fixed = False  # tensorplay sizes its intra-op pool once per process


class TensorplayEngine(Engine):
    name = "tensorplay"
    library, array_type = "tensorplay", "Tensor"
    error_class = TensorplayGradcheckError
    wording = TensorplayWording()
    # shares_reference stays False: every check calls afresh (sharing is not verified for tensorplay)

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, tp.Tensor)

    def requires_grad(self, value: Any, func: Callable | None = None, position: int | None = None) -> bool:
        return isinstance(value, tp.Tensor) and bool(value.requires_grad)

    def track(self, value: tp.Tensor) -> tp.Tensor:
        return value.requires_grad_()

    def info(self, value: tp.Tensor, func: Callable | None = None, position: int | None = None) -> TensorInfo:
        return TensorInfo.of(
            value.shape,
            numpy_dtype(value.dtype),
            str(value.dtype),
            bool(value.requires_grad),
            # an empty tensor cannot overlap (tensorplay gives some of them all-zero strides)
            overlapping=not _is_sparse(value)
            and value.numel() > 0
            and any(st == 0 and sz > 1 for st, sz in zip(value.stride(), value.shape)),
        )

    def to_numpy(self, value: tp.Tensor) -> np.ndarray:
        return to_numpy(value)

    def from_numpy(self, array: np.ndarray, like: tp.Tensor) -> tp.Tensor:
        return to_tensor(np.asarray(array, dtype=numpy_dtype(like.dtype)), dtype=like.dtype)

    def check_outputs(self, outputs: tuple) -> None:
        if any(o.layout != tp.strided for o in outputs):
            raise ValueError(
                "Sparse output is not supported at gradcheck yet. "
                "Please call to_dense() on the output of fn for gradcheck."
            )

    def call(self, func: Callable, inputs: tuple) -> tuple:
        with tp.enable_grad():
            return as_tuple(func(*inputs))

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

    def pullback(self, func, inputs, outputs, diff_positions, output_positions, create_graph=False):
        wrt = [inputs[p] for p in diff_positions]
        selected = [outputs[p] for p in output_positions]

        def pullback(cotangents):
            differentiated, given = selected, list(cotangents)
            if any(c is None for c in given):  # undefined grad-outputs: see UndefinedGrad
                differentiated = [UndefinedGrad.apply(o) if c is None else o for o, c in zip(selected, given)]
                given = [tp.zeros_like(o) if c is None else c for o, c in zip(differentiated, given)]
            grads = _grad(differentiated, wrt, given, retain_graph=True, create_graph=create_graph)
            if create_graph and any(g.requires_grad for g in given):
                if not all(g.requires_grad for g in grads if g is not None):
                    warnings.warn(NO_DOUBLE_BACKWARD, stacklevel=2)
            return list(grads)

        return pullback

    def pushforward(self, func: Callable, inputs: tuple, diff_positions: Sequence[int]):
        raise self.wording.missing(EngineCapabilityError(), "Checking forward-mode derivatives", "check_forward_ad")

    def vmap(self, function: Callable, stacked: tp.Tensor) -> tuple:
        return tuple(vmap(function)(stacked))

    def batch_evaluate(
        self, func: Callable, inputs: tuple, position: int, stacked: tp.Tensor, *, loops: bool = False
    ) -> tuple:
        """``tensorplay.func.vmap``, recording no gradients (``loops`` or not: strict); random
        operations draw once for the batch, as torch's
        (:func:`~distcheck.engines.torch_batch.batch_evaluate`)."""
        args = [x.detach() if isinstance(x, tp.Tensor) else x for x in inputs]
        args[position] = stacked
        in_dims = tuple(0 if k == position else None for k in range(len(args)))
        with tp.no_grad():
            return as_tuple(vmap(func, in_dims=in_dims, randomness="same")(*args))

    def transform_pullback(self, func, inputs, diff_positions, output_positions):
        """``tensorplay.func.vjp`` (its autograd's ``grad`` cannot be vmapped)."""
        restricted = Restricted(func, inputs, diff_positions, output_positions)
        _, vjp = tp.func.vjp(restricted, *(inputs[p] for p in diff_positions))
        return lambda cotangents: list(vjp(tuple(cotangents)))

    def complex_part(self, value: Any, part: Part) -> Any:
        """``view_as_real(o).select(-1, k)``: ``Tensor.real``/``.imag`` are not differentiable in
        tensorplay; this is, with torch's gradients."""
        if not (isinstance(value, tp.Tensor) and value.is_complex()):
            return value
        return tp.view_as_real(value).select(-1, 0 if part == Part.REAL else 1)

    def complex_join(self, part_value: tp.Tensor, other: tp.Tensor, part: Part) -> tp.Tensor:
        return tp.complex(part_value, other) if part == Part.REAL else tp.complex(other, part_value)

    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return unit_vectors(numels, dtypes)  # numpy's: tp.rand ignores its generator

    def rng_state(self):
        return tp.get_rng_state()

    def set_rng_state(self, state) -> None:
        tp.set_rng_state(state)

    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        # tensorplay's global RNG (tp.manual_seed reproduces them), like torch.randn_like.
        return [to_numpy(tp.randn(tuple(shape), dtype=tensorplay_dtype(dtype))) for shape, dtype in zip(shapes, dtypes)]

    def random_grad_outputs(self, outputs: Sequence[tp.Tensor], noncontiguous: bool) -> tuple:
        """Uniform in [-1, 1) from tensorplay's global RNG, in each output's dtype (complex outputs
        get complex grad-outputs, both parts uniform)."""
        made = []
        for o in outputs:
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
