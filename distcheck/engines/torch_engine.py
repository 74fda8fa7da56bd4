"""PyTorch engine: torch tensors, torch.autograd for VJPs and forward-mode AD for JVPs.

What the engine does is split by job: :mod:`distcheck.engines.torch_tensors` (numpy copies,
dtypes, sparse layouts), :mod:`distcheck.engines.torch_perturb` (finite differences: moving
input elements, with the CPU fast paths), and here the engine itself (autograd, random
numbers, messages).
"""

from __future__ import annotations

import collections
import importlib
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from distcheck.engines import torch_batch, torch_grad, torch_perturb, torch_tensors
from distcheck.engines.base import Engine, TensorInfo
from distcheck.engines.torch_tensors import is_float_or_complex, numpy_dtype, to_numpy, torch_dtype
from distcheck.errors import GradcheckError
from distcheck.kinds import Fallback, Part

_TorchGradcheckError = importlib.import_module("torch.autograd.gradcheck").GradcheckError


class TorchGradcheckError(GradcheckError, _TorchGradcheckError):
    """A failed check of a torch function: catchable as either library's GradcheckError."""


class _Threads:
    """``with``: torch on ``n`` intra-op threads, the previous number restored afterwards. A plain
    class, not a generator context manager: every unit enters one, and most change nothing."""

    def __init__(self, n: int):
        self.n, self.before = n, n

    def __enter__(self) -> None:
        self.before = torch.get_num_threads()
        if self.before != self.n:
            torch.set_num_threads(self.n)

    def __exit__(self, *exc) -> None:
        if self.before != self.n:
            torch.set_num_threads(self.before)


class TorchEngine(Engine):
    name = "torch"
    library, array_type = "torch", "Tensor"
    error_class = TorchGradcheckError
    shares_reference = True  # torch's gradcheck differentiates the outputs of one call

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor)

    def requires_grad(self, value: Any, func: Callable | None = None, position: int | None = None) -> bool:
        return isinstance(value, torch.Tensor) and value.requires_grad

    def version(self, value: Any) -> int | None:
        """Finite differences perturb ``.data``, which has its own counter, and restore it."""
        return value._version if isinstance(value, torch.Tensor) else None

    def track(self, value: torch.Tensor) -> torch.Tensor:
        return value.requires_grad_()

    def info(self, value: torch.Tensor, func: Callable | None = None, position: int | None = None) -> TensorInfo:
        values = torch_tensors.values(value)
        overlapping = False
        if value.layout != torch._mkldnn:
            overlapping = not all(st > 0 or sz <= 1 for st, sz in zip(values.stride(), values.size()))
        return TensorInfo.of(
            value.shape,
            numpy_dtype(value.dtype),
            str(value.dtype),
            value.requires_grad,
            overlapping=overlapping,
            elements=values.numel() if value.layout not in (torch.strided, torch._mkldnn) else None,
            device=str(value.device),
        )

    def to_numpy(self, value: torch.Tensor) -> np.ndarray:
        return to_numpy(value)

    def from_numpy(self, array: np.ndarray, like: torch.Tensor) -> torch.Tensor:
        return torch_tensors.tensor_of(array).to(like.device, like.dtype)

    def shape(self, value: torch.Tensor) -> tuple[int, ...]:
        return tuple(value.shape)

    def zeros_like(self, value: torch.Tensor) -> torch.Tensor:
        if value.layout != torch.strided:  # a sparse input: dense zeros of its shape, as through numpy
            return super().zeros_like(value)
        return torch.zeros(value.shape, dtype=value.dtype, device=value.device)  # no conj/neg bits: +0

    def check_outputs(self, outputs: tuple) -> None:
        if any(o.layout not in (torch.strided, torch._mkldnn) for o in outputs):
            raise ValueError(
                "Sparse output is not supported at gradcheck yet. "
                "Please call to_dense(masked_grad=...) on the output of fn for gradcheck."
            )
        if any(o.layout == torch._mkldnn for o in outputs):
            raise ValueError(
                "MKLDNN output is not supported at gradcheck yet. "
                "Please call to_dense(masked_grad=...) on the output of fn for gradcheck."
            )

    def call(self, func: Callable, inputs: tuple) -> tuple:
        return torch_tensors.call(func, inputs)

    def threads(self, n: int) -> _Threads:
        """Run engine math on ``n`` intra-op threads (restored afterwards)."""
        return _Threads(n)

    def warm_up(self) -> None:
        """A first pullback through autograd's engine, made here: its one-off costs stay out of a
        check's timing (the planner cuts a check into tasks by it)."""
        x = torch.ones(2, dtype=torch.float64, requires_grad=True)
        with torch.enable_grad():
            torch_grad.grad([x * 2], [x], [torch.ones(2, dtype=torch.float64)])

    def perturbed_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        return torch_perturb.perturbed_evaluator(func, inputs, position, outputs)

    def direction_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        return torch_perturb.direction_evaluator(func, inputs, position, outputs)

    def element_rows(self, value: torch.Tensor) -> np.ndarray | None:
        return torch_tensors.element_rows(value)

    def densify(self, inputs: tuple) -> tuple | None:
        """Sparse inputs with every element specified (zeros where unspecified), as torch's
        gradcheck perturbs them when ``masked`` is off; None if there is no sparse input."""
        sparse = [isinstance(x, torch.Tensor) and x.layout != torch.strided for x in inputs]
        if not any(sparse):
            return None
        return tuple(torch_tensors.densified(x) if s else x for x, s in zip(inputs, sparse))

    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        # torch.autograd.gradcheck's draws: a fresh default-seeded generator, float32 uniform
        # values cast to the vector's dtype, divided by their norm in that dtype. They depend on
        # the sizes and dtypes alone, so the last few draws are kept (each caller gets copies).
        key = (tuple(int(n) for n in numels), tuple(np.dtype(d) for d in dtypes))
        with _drawn_lock:
            kept = _drawn.get(key)
            if kept is not None:
                _drawn.move_to_end(key)
        if kept is None:
            kept = _draw_unit_vectors(*key)
            if sum(key[0]) <= _DRAWN_MAX_ELEMENTS:
                with _drawn_lock:
                    _drawn[key] = kept
                    while len(_drawn) > _DRAWN_KEPT:
                        _drawn.popitem(last=False)
        return [v.copy() for v in kept]

    def rng_state(self):
        return torch.get_rng_state()

    def set_rng_state(self, state) -> None:
        torch.set_rng_state(state)

    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return [torch.randn(shape, dtype=torch_dtype(dtype)).numpy().copy() for shape, dtype in zip(shapes, dtypes)]

    def pullback(self, func, inputs, outputs, diff_positions, output_positions, create_graph=False):
        wrt = [inputs[p] for p in diff_positions]
        selected = [outputs[p] for p in output_positions]

        def pullback(cotangents):
            differentiated, given = selected, list(cotangents)
            if any(c is None for c in given):  # undefined grad-outputs: torch's UndefinedGrad
                undefined = torch._C._functions.UndefinedGrad
                differentiated = [undefined()(o) if c is None else o for o, c in zip(selected, given)]
                given = [
                    torch.zeros_like(o, memory_format=torch.legacy_contiguous_format) if c is None else c
                    for o, c in zip(differentiated, given)
                ]
            return list(torch_grad.grad(differentiated, wrt, given, create_graph))

        return pullback

    def pushforward(self, func, inputs, diff_positions):
        fw = torch.autograd.forward_ad

        def pushforward(tangents):
            with fw.dual_level():
                duals = list(inputs)
                for p, tangent in zip(diff_positions, tangents):
                    duals[p] = inputs[p].detach() if tangent is None else _dual(inputs[p], tangent)
                return [fw.unpack_dual(o).tangent for o in self.call(func, tuple(duals)) if is_float_or_complex(o)]

        return pushforward

    def vmap(self, function: Callable, stacked: torch.Tensor) -> tuple:
        """torch's legacy vmap: what torch's gradcheck batches with."""
        from torch._vmap_internals import _vmap

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="There is a performance drop")
            warnings.filterwarnings("ignore", message="Please use `torch.vmap`")
            return _vmap(function)(stacked)

    def batch_evaluate(
        self, func: Callable, inputs: tuple, position: int, stacked: torch.Tensor, *, loops: bool = False
    ) -> tuple:
        return torch_batch.batch_evaluate(func, inputs, position, stacked, loops=loops)

    def batching_failure(self, error: Exception) -> Fallback:
        return torch_batch.batching_failure(error)

    def transform_pullback(self, func, inputs, diff_positions, output_positions):
        return torch_batch.transform_pullback(func, inputs, diff_positions, output_positions)

    def complex_part(self, value: Any, part: Part) -> Any:
        if not (isinstance(value, torch.Tensor) and value.is_complex()):
            return value
        return torch.real(value) if part == Part.REAL else torch.imag(value)

    def complex_join(self, part_value: torch.Tensor, other: torch.Tensor, part: Part) -> torch.Tensor:
        joined = _joined_dual(part_value, other, part)
        if joined is not None:
            return joined
        return part_value + other * 1j if part == Part.REAL else other + part_value * 1j

    def random_grad_outputs(self, outputs, noncontiguous: bool) -> tuple:
        return tuple(
            torch.testing.make_tensor(
                o.shape,
                dtype=o.dtype if is_float_or_complex(o) else torch.double,
                device=o.device,
                low=-1,
                high=1,
                requires_grad=True,
                noncontiguous=noncontiguous,
            )
            for o in outputs
        )

    def grad_layout_error(self, grad: torch.Tensor, value: torch.Tensor) -> str | None:
        return torch_tensors.grad_layout_error(grad, value)

    def stack(self, values) -> np.ndarray:
        return to_numpy(torch.stack(list(values)))

    def format_block(self, block: np.ndarray) -> str:
        return str(torch_tensors.tensor_of(np.ascontiguousarray(block)))


_DRAWN_KEPT = 16  # fast mode's unit vectors kept, by sizes and dtypes (a check draws alike for each part)
_DRAWN_MAX_ELEMENTS = 1 << 20  # larger draws are not kept
_drawn: collections.OrderedDict[tuple, list[np.ndarray]] = collections.OrderedDict()
_drawn_lock = threading.Lock()


def _draw_unit_vectors(numels: tuple[int, ...], dtypes: tuple[np.dtype, ...]) -> list[np.ndarray]:
    generator = torch.Generator()
    vectors = []
    for numel, dtype in zip(numels, dtypes):
        vec = torch.rand(numel, generator=generator).to(torch_dtype(dtype))
        vec /= torch.linalg.vector_norm(vec)  # Tensor.norm()'s computation, without its Python
        vec = vec.numpy()
        vec.flags.writeable = False  # kept: callers get copies
        vectors.append(vec)
    return vectors


def _joined_dual(part_value: torch.Tensor, other: torch.Tensor, part: Part) -> torch.Tensor | None:
    """``complex_join`` of a dual ``part_value`` (a forward-mode JVP of a complex input's part):
    the primal and the tangent that torch's forward AD gives ``part_value + other * 1j`` (real
    part) or ``other + part_value * 1j`` (imaginary part), bit for bit, computed on plain
    tensors. The tangent torch gives is the part's tangent converted to complex (real part) or
    ``tangent * 1j`` (imaginary part): the constant's absent tangent is a zero tensor, which
    adds nothing. That zero tensor's shape is worked out by a Python meta kernel in every such
    call, which this path does without. The result is a fresh tensor, not a view, as the
    expression's. None (use the expression) when ``part_value`` has no tangent, takes part in
    autograd, is not strided or has a tangent batched by vmap, or ``other`` is not a constant
    tensor of its shape."""
    tensors = isinstance(part_value, torch.Tensor) and isinstance(other, torch.Tensor)
    if not tensors or part_value.layout != torch.strided or other.shape != part_value.shape:
        return None
    if part_value.requires_grad or other.requires_grad:
        return None
    fw = torch.autograd.forward_ad
    primal, tangent = fw.unpack_dual(part_value)
    if tangent is None or torch._C._functorch.is_legacy_batchedtensor(tangent):
        return None
    if fw.unpack_dual(other).tangent is not None:  # not a constant: the expression adds its tangent
        return None
    if part == Part.REAL:
        value = primal + other * 1j
        tangent = tangent.to(value.dtype)
    else:
        value = other + primal * 1j
        tangent = tangent * 1j
    return fw.make_dual(value, tangent).clone()


def _dual(x: torch.Tensor, tangent: torch.Tensor) -> torch.Tensor:
    """``x`` as a dual tensor carrying ``tangent``. The tangent is written into the one the dual
    holds (as torch's gradcheck does: make_dual may store a copy laid out as ``x``); inside
    vmap it is given to make_dual (an unbatched tangent cannot take batched values)."""
    fw = torch.autograd.forward_ad
    if torch._C._functorch.is_legacy_batchedtensor(tangent):
        return fw.make_dual(x.detach(), tangent)
    dual = fw.make_dual(x.detach(), torch.zeros_like(x))
    fw.unpack_dual(dual).tangent.copy_(tangent)
    return dual
