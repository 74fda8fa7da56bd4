"""PyTorch engine: torch tensors, torch.autograd for VJPs."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from distcheck.engines.base import Engine, TensorInfo
from distcheck.engines.tuples import as_tuple
from distcheck.errors import GradcheckError
from distcheck.kinds import Part

_NUMPY_DTYPES = {
    torch.bfloat16: np.float32,  # numpy has no bfloat16: checked at float32
    torch.complex32: np.complex64,
}


_TorchGradcheckError = importlib.import_module("torch.autograd.gradcheck").GradcheckError


class TorchGradcheckError(GradcheckError, _TorchGradcheckError):
    """A failed check of a torch function: catchable as either library's GradcheckError."""


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy copy of a tensor's values (dense, conjugation resolved)."""
    t = t.detach()
    try:  # the common case, fast: a plain CPU tensor (the others raise)
        return np.array(t.numpy())
    except (RuntimeError, TypeError):
        pass
    if t._is_zerotensor():  # autograd's efficient zeros (e.g. abs's double backward) have no data
        return np.zeros(tuple(t.shape), dtype=numpy_dtype(t.dtype))
    if t.layout != torch.strided:
        t = t.to_dense()
    t = t.resolve_conj().resolve_neg().cpu()
    if t.dtype in _NUMPY_DTYPES:
        t = t.to({torch.bfloat16: torch.float32, torch.complex32: torch.complex64}[t.dtype])
    return np.array(t.numpy(), copy=True)


# dtypes whose element arithmetic numpy does exactly as torch (finite differences move elements)
_NUMPY_ARITHMETIC = (torch.float64, torch.complex128)


def _plain(data: torch.Tensor) -> bool:
    """Whether ``data.numpy()`` is a view of its elements in order (contiguous, no lazy
    conjugation or negation)."""
    return data.is_contiguous() and not (data.is_conj() or data.is_neg())


def _wanted_numpy(outputs: tuple, wanted: Sequence[bool]) -> list[np.ndarray | None]:
    """Numpy copies of the wanted tensor outputs (None for the others)."""
    return [to_numpy(o) if want and isinstance(o, torch.Tensor) else None for o, want in zip(outputs, wanted)]


_numpy_dtypes: dict[torch.dtype, np.dtype] = {}  # found once per dtype: every check asks
_torch_dtypes: dict[np.dtype, torch.dtype] = {}


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    if dtype not in _numpy_dtypes:
        found = _NUMPY_DTYPES.get(dtype) or torch.empty((), dtype=dtype).numpy().dtype
        _numpy_dtypes[dtype] = np.dtype(found)
    return _numpy_dtypes[dtype]


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    if dtype not in _torch_dtypes:
        _torch_dtypes[dtype] = torch.from_numpy(np.empty(0, dtype=dtype)).dtype
    return _torch_dtypes[dtype]


def _is_float_or_complex(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _values(t: torch.Tensor) -> torch.Tensor:
    if t.layout == torch.sparse_coo:
        return t._values()
    if t.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        return t.values()
    return t


def _perturbable(t: torch.Tensor) -> torch.Tensor:
    """What finite differences perturb in place: the data of a strided tensor, the specified
    values of a sparse one."""
    if t.layout == torch._mkldnn:
        raise NotImplementedError("gradcheck of MKLDNN inputs is not supported")
    return _values(t).data


def _densified(x: torch.Tensor) -> torch.Tensor:
    """``x`` with all elements specified: zeros where ``x`` has none, same layout."""
    dense = x.detach().to_dense()
    sparse_dims = x.sparse_dim() if x.layout == torch.sparse_coo else 2
    indices = torch.ones(x.shape[:sparse_dims], dtype=torch.int8).nonzero().t()
    full = torch.sparse_coo_tensor(indices, dense[tuple(indices)], x.shape)._coalesced_(True)
    if x.layout != torch.sparse_coo:
        full = full.to_sparse(layout=x.layout)
    return full.requires_grad_(x.requires_grad)


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
        values = _values(value)
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
        return torch.from_numpy(np.asarray(array)).to(like.device, like.dtype)

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
        if torch.is_grad_enabled():  # the usual case: no context to enter (the call is hot)
            return as_tuple(func(*inputs))
        with torch.enable_grad():
            return as_tuple(func(*inputs))

    def threads(self, n: int) -> _Threads:
        """Run engine math on ``n`` intra-op threads (restored afterwards)."""
        return _Threads(n)

    def warm_up(self) -> None:
        """torch's first ``autograd.grad`` with grad-outputs imports ``torch.fx``'s symbolic
        shapes and sympy (1.3 s): timed once, it made the first check on Ray 493 tasks, not 12."""
        x = torch.ones(2, dtype=torch.float64, requires_grad=True)
        with torch.enable_grad():
            torch.autograd.grad(x * 2, x, torch.ones(2, dtype=torch.float64))

    def perturbed_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        data = _perturbable(inputs[position])  # a sparse input: its specified values
        shape = tuple(data.shape)
        if data.dtype in _NUMPY_ARITHMETIC and _plain(data):
            return self._numpy_perturbed(func, inputs, outputs, data.numpy().reshape(-1))
        flat = data.view(-1) if data.is_contiguous() else None

        def evaluate(k: int, delta: complex) -> list[np.ndarray | None]:
            entry = flat[k] if flat is not None else data[np.unravel_index(k, shape)]
            return self._outputs_moved(func, inputs, outputs, entry, delta)

        return evaluate

    def _numpy_perturbed(self, func: Callable, inputs: tuple, outputs: Sequence[bool], flat: np.ndarray):
        """``perturbed_evaluator`` through ``flat``, a numpy view of the input's memory: the
        same arithmetic as on a torch element (IEEE double, component-wise for complex), a
        fraction of the cost."""
        wanted = list(outputs)

        def evaluate(k: int, delta: complex) -> list[np.ndarray | None]:
            original = flat[k]
            flat[k] = original + delta
            try:  # copy the outputs before restoring: an output may be a view of the input
                return _wanted_numpy(self.call(func, inputs), wanted)
            finally:
                flat[k] = original

        return evaluate

    def _outputs_moved(self, func: Callable, inputs: tuple, outputs: Sequence[bool], entry: torch.Tensor, step):
        """The wanted outputs (numpy copies) with ``entry`` (part of an input, in place) moved
        by ``step``; ``entry`` restored afterwards."""
        original = entry.clone()
        entry.copy_(original + step)
        try:  # copy the outputs before restoring: an output may be a view of the input
            return _wanted_numpy(self.call(func, inputs), outputs)
        finally:
            entry.copy_(original)

    def element_rows(self, value: torch.Tensor) -> np.ndarray | None:
        """For a sparse tensor, the flat dense index of each of its specified values (in the
        order finite differences perturb them); None for a strided tensor (all elements, in order)."""
        if value.layout == torch.strided:
            return None
        if value.layout == torch.sparse_coo:
            indices, values = value._indices(), value._values()
        elif value.layout == torch.sparse_csr:
            indices = torch._convert_indices_from_csr_to_coo(value.crow_indices(), value.col_indices())
            values = value.values()
        elif value.layout == torch.sparse_csc:
            indices = torch._convert_indices_from_csr_to_coo(value.ccol_indices(), value.row_indices(), transpose=True)
            values = value.values()
        else:
            raise NotImplementedError(f"gradcheck of {value.layout} inputs is not supported (COO, CSR and CSC are)")
        strides = np.cumprod((tuple(value.shape)[1:] + (1,))[::-1])[::-1].astype(np.int64)
        base = indices.t().numpy().astype(np.int64) @ strides[: indices.shape[0]]
        dense = int(np.prod(values.shape[1:], dtype=np.int64))
        return (base[:, None] + np.arange(dense, dtype=np.int64)[None, :]).reshape(-1)

    def densify(self, inputs: tuple) -> tuple | None:
        """Sparse inputs with every element specified (zeros where unspecified), as torch's
        gradcheck perturbs them when ``masked`` is off; None if there is no sparse input."""
        if not any(isinstance(x, torch.Tensor) and x.layout != torch.strided for x in inputs):
            return None
        return tuple(_densified(x) if isinstance(x, torch.Tensor) and x.layout != torch.strided else x for x in inputs)

    def direction_evaluator(self, func: Callable, inputs: tuple, position: int, outputs: Sequence[bool]):
        x = inputs[position]
        data = _perturbable(x)
        rows = self.element_rows(x)
        # A real double input moves through a numpy view of its memory: torch adds a real step
        # exactly as numpy does (complex steps are left to torch: its add multiplies the step by
        # alpha=1, which can flip the sign of a zero component).
        flat = data.numpy().reshape(-1) if data.dtype == torch.float64 and _plain(data) else None
        wanted = list(outputs)

        def evaluate(delta: np.ndarray) -> list[np.ndarray | None]:
            step = np.asarray(delta).reshape(-1)
            if rows is not None:
                step = step[rows]
            if flat is None or step.dtype != flat.dtype:
                return self._outputs_moved(func, inputs, outputs, data, torch.from_numpy(step).reshape(data.shape))
            original = flat.copy()
            np.add(original, step, out=flat)
            try:  # copy the outputs before restoring: an output may be a view of the input
                return _wanted_numpy(self.call(func, inputs), wanted)
            finally:
                flat[:] = original

        return evaluate

    def random_unit_vectors(self, numels: Sequence[int], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        # torch.autograd.gradcheck's draws: a fresh default-seeded generator, float32 uniform
        # values cast to the vector's dtype, divided by their norm in that dtype.
        generator = torch.Generator()
        vectors = []
        for numel, dtype in zip(numels, dtypes):
            vec = torch.rand(int(numel), generator=generator).to(_torch_dtype(dtype))
            vec /= torch.linalg.vector_norm(vec)  # Tensor.norm()'s computation, without its Python
            vectors.append(vec.numpy().copy())
        return vectors

    def random_normal(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[np.dtype]) -> list[np.ndarray]:
        return [torch.randn(shape, dtype=_torch_dtype(dtype)).numpy().copy() for shape, dtype in zip(shapes, dtypes)]

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
            grads = torch.autograd.grad(
                differentiated, wrt, given, retain_graph=True, create_graph=create_graph, allow_unused=True
            )
            return list(grads)

        return pullback

    def pushforward(self, func, inputs, diff_positions):
        fw = torch.autograd.forward_ad

        def pushforward(tangents):
            with fw.dual_level():
                duals = list(inputs)
                for p, tangent in zip(diff_positions, tangents):
                    duals[p] = inputs[p].detach() if tangent is None else _dual(inputs[p], tangent)
                return [fw.unpack_dual(o).tangent for o in self.call(func, tuple(duals)) if _is_float_or_complex(o)]

        return pushforward

    def vmap(self, function: Callable, stacked: torch.Tensor) -> tuple:
        """torch's legacy vmap: what torch's gradcheck batches with."""
        from torch._vmap_internals import _vmap

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="There is a performance drop")
            warnings.filterwarnings("ignore", message="Please use `torch.vmap`")
            return _vmap(function)(stacked)

    def complex_part(self, value: Any, part: Part) -> Any:
        if not (isinstance(value, torch.Tensor) and value.is_complex()):
            return value
        return torch.real(value) if part == Part.REAL else torch.imag(value)

    def complex_join(self, part_value: torch.Tensor, other: torch.Tensor, part: Part) -> torch.Tensor:
        return part_value + other * 1j if part == Part.REAL else other + part_value * 1j

    def random_grad_outputs(self, outputs, noncontiguous: bool) -> tuple:
        return tuple(
            torch.testing.make_tensor(
                o.shape,
                dtype=o.dtype if _is_float_or_complex(o) else torch.double,
                device=o.device,
                low=-1,
                high=1,
                requires_grad=True,
                noncontiguous=noncontiguous,
            )
            for o in outputs
        )

    def grad_layout_error(self, grad: torch.Tensor, value: torch.Tensor) -> str | None:
        if grad.layout == torch.strided:
            return None
        if grad.layout != value.layout:
            return f"grad is incorrect layout ({grad.layout} is not {value.layout})"
        if grad.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
            kind = str(grad.layout).replace("torch.", "").replace("_coo", "")
            for dim in ("sparse_dim", "dense_dim"):
                got, expected = getattr(grad, dim)(), getattr(value, dim)()
                if got != expected:
                    return f"grad is {kind} tensor, but has incorrect {dim} {got}, expected {expected}"
        return None

    def stack(self, values) -> np.ndarray:
        return to_numpy(torch.stack(list(values)))

    def format_block(self, block: np.ndarray) -> str:
        return str(torch.from_numpy(np.ascontiguousarray(block)))


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
