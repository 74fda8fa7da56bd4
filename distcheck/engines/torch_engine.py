"""PyTorch engine: torch tensors, torch.autograd for VJPs."""

from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from distcheck.engines.base import TensorInfo
from distcheck.errors import GradcheckError

_NUMPY_DTYPES = {
    torch.bfloat16: np.float32,  # numpy has no bfloat16: checked at float32
    torch.complex32: np.complex64,
}


_reference = threading.local()  # .entry: (func, inputs, input versions, outputs) of the last reference call

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


def _differentiable(outputs: tuple) -> tuple:
    return tuple(o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad)


class ComplexOutputPart:
    """``func`` with torch.real or torch.imag applied to its complex outputs."""

    def __init__(self, func: Callable, part: str):
        self.func, self.part = func, part

    def __call__(self, *inputs):
        take = torch.real if self.part == "real" else torch.imag
        return tuple(
            take(o) if isinstance(o, torch.Tensor) and o.is_complex() else o for o in _as_tuple(self.func(*inputs))
        )


class ComplexInputPart:
    """``func`` seen as a function of the real or imaginary parts of its complex inputs, the
    other part held at its original value (forward-mode checks of complex inputs)."""

    def __init__(self, func: Callable, positions: tuple[int, ...], originals: tuple, part: str):
        self.func, self.positions, self.originals, self.part = func, positions, originals, part

    def __call__(self, *inputs):
        full = list(inputs)
        for i, original in zip(self.positions, self.originals):
            if self.part == "real":
                full[i] = inputs[i] + original.imag * 1j
            else:
                full[i] = original.real + inputs[i] * 1j
        return _as_tuple(self.func(*full))


class GradOfOutputs:
    """gradgradcheck's function: ``(*inputs, *grad_outputs) -> d(outputs)/d(inputs)·grad_outputs``.

    The gradients are built with ``create_graph=True`` so that they can be differentiated
    again; unused inputs (None gradients) are left out, as torch's gradgradcheck does.
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
        grads = torch.autograd.grad(outputs, wrt, grad_outputs, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)


def _as_tuple(x) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


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


class TorchEngine:
    name = "torch"
    error_class = TorchGradcheckError

    def owns(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor)

    is_tensor = owns

    def info(self, value: torch.Tensor, func: Callable | None = None, position: int | None = None) -> TensorInfo:
        values = _values(value)
        overlapping = False
        if value.layout != torch._mkldnn:
            overlapping = not all(st > 0 or sz <= 1 for st, sz in zip(values.stride(), values.size()))
        return TensorInfo(
            shape=tuple(value.shape),
            dtype=numpy_dtype(value.dtype),
            dtype_name=str(value.dtype),
            is_complex=value.is_complex(),
            is_floating=value.is_floating_point(),
            requires_grad=value.requires_grad,
            is_double=value.dtype in (torch.float64, torch.complex128),
            overlapping=overlapping,
            elements=values.numel() if value.layout not in (torch.strided, torch._mkldnn) else None,
        )

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
            return _as_tuple(func(*inputs))
        with torch.enable_grad():
            return _as_tuple(func(*inputs))

    def reference_call(self, func: Callable, inputs: tuple) -> tuple:
        """The outputs of one call of ``func(*inputs)``, with their graph, shared by every
        backward pass and check of these inputs in this thread — as torch's gradcheck
        differentiates the outputs of its one call for all of them — instead of a call each.
        The same function and input objects, with inputs unchanged since (their version
        counters; finite differences perturb ``.data``, which has its own, and restore it),
        get the kept outputs; anything else is called afresh. Users of the outputs' graph
        must retain it; :meth:`forget` drops it."""
        versions = tuple(x._version if isinstance(x, torch.Tensor) else None for x in inputs)
        kept = getattr(_reference, "entry", None)
        if (
            kept is not None
            and kept[0] is func
            and len(kept[1]) == len(inputs)
            and all(a is b for a, b in zip(kept[1], inputs))
            and kept[2] == versions
        ):
            return kept[3]
        _reference.entry = None  # the old graph goes first: never two at once
        outputs = self.call(func, inputs)
        _reference.entry = (func, inputs, versions, outputs)
        return outputs

    def forget(self) -> None:
        """Drop the outputs :meth:`reference_call` keeps in this thread (and their graph)."""
        _reference.entry = None

    def threads(self, n: int) -> _Threads:
        """Run engine math on ``n`` intra-op threads (restored afterwards)."""
        return _Threads(n)

    def output_part(self, func: Callable, part: str, n_inputs: int) -> Callable:
        return ComplexOutputPart(func, part)

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

    def vjp(self, func: Callable, inputs: tuple, output_position: int, diff_positions: Sequence[int]):
        output = self.reference_call(func, inputs)[output_position]
        wrt = [inputs[p] for p in diff_positions]
        one_hot: list[torch.Tensor] = []  # the tensor and its flat view, made on the first one-hot row
        given: list = [None, None]  # the last grad-output array and its tensor: rows are run twice

        def vjp(g: int | np.ndarray) -> list[np.ndarray | None]:
            if isinstance(g, (int, np.integer)):
                if not one_hot:  # fast mode has none
                    tensor = torch.zeros_like(output, memory_format=torch.legacy_contiguous_format)
                    one_hot.extend((tensor, tensor.view(-1)))
                one_hot[1].zero_()
                one_hot[1][int(g)] = 1.0
                grad_output = one_hot[0]
            else:
                if given[0] is not g:
                    given[:] = [g, torch.from_numpy(np.asarray(g)).to(output.dtype).reshape(output.shape)]
                grad_output = given[1]
            grads = torch.autograd.grad(output, wrt, grad_output, retain_graph=True, allow_unused=True)
            return [None if g is None else to_numpy(g) for g in grads]

        return vjp

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

    def jvp(self, func: Callable, inputs: tuple, diff_positions: Sequence[int]):
        fw = torch.autograd.forward_ad

        def jvp(k: int, tangent: int | np.ndarray) -> list[np.ndarray | None]:
            with fw.dual_level():
                duals, tangents = list(inputs), []
                for p in diff_positions:
                    dual = fw.make_dual(inputs[p].detach(), torch.zeros_like(inputs[p]))
                    # a differentiable view's tangent may not be the one given: read it back
                    tangents.append(fw.unpack_dual(dual).tangent)
                    duals[p] = dual
                if isinstance(tangent, (int, np.integer)):
                    shape = tuple(tangents[k].shape)
                    tangents[k][np.unravel_index(int(tangent), shape) if shape else ()] = 1.0
                else:
                    tangents[k].copy_(torch.from_numpy(np.asarray(tangent)).reshape(tangents[k].shape))
                result = []
                for o in self.call(func, tuple(duals)):
                    if _is_float_or_complex(o):
                        out_tangent = fw.unpack_dual(o).tangent
                        result.append(None if out_tangent is None else to_numpy(out_tangent))
                return result

        return jvp

    def input_part(self, func: Callable, inputs: tuple, part: str) -> tuple[Callable, tuple]:
        complex_positions = tuple(i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.is_complex())
        originals = tuple(inputs[i].detach() for i in complex_positions)
        take = torch.real if part == "real" else torch.imag
        parts = list(inputs)
        for i in complex_positions:
            parts[i] = take(inputs[i]).detach().clone().requires_grad_(inputs[i].requires_grad)
        return ComplexInputPart(func, complex_positions, originals, part), tuple(parts)

    def check_batched_grad(
        self, func: Callable, inputs: tuple, output_position: int, grad_outputs: Sequence[np.ndarray]
    ) -> None:
        output = self.reference_call(func, inputs)[output_position]
        wrt = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]

        def vjp(v):
            grads = torch.autograd.grad(output, wrt, v, retain_graph=True, allow_unused=True)
            return tuple(
                torch.zeros([], dtype=x.dtype, device=x.device).expand(x.shape) if g is None else g
                for g, x in zip(grads, wrt)
            )

        vectors = [torch.from_numpy(g).to(output.dtype).reshape(output.shape) for g in grad_outputs]
        expected = [torch.stack(shards) for shards in zip(*(vjp(v) for v in vectors))]
        result = _batched(vjp, torch.stack(vectors), self.error_class, forward=False)
        for position, (res, exp) in enumerate(zip(result, expected)):
            if not torch.allclose(res, exp):
                raise self.error_class(_batched_mismatch(output_position, position, res, exp, forward=False))

    def check_batched_forward_grad(
        self, func: Callable, inputs: tuple, position: int, tangents: Sequence[np.ndarray]
    ) -> None:
        fw = torch.autograd.forward_ad
        x = inputs[position]

        def jvp(tangent):
            with fw.dual_level():
                dual = fw.make_dual(x.detach(), tangent)
                duals = tuple(
                    dual if i == position else (v.detach() if isinstance(v, torch.Tensor) else v)
                    for i, v in enumerate(inputs)
                )
                result = []
                for o in _as_tuple(func(*duals)):
                    if o is None:
                        continue
                    primal, out_tangent = fw.unpack_dual(o)
                    result.append(
                        torch.zeros([], dtype=primal.dtype, device=primal.device).expand(primal.shape)
                        if out_tangent is None
                        else out_tangent
                    )
                return tuple(result)

        vectors = [torch.from_numpy(t).to(x.dtype).reshape(x.shape) for t in tangents]
        expected = [torch.stack(shards) for shards in zip(*(jvp(v) for v in vectors))]
        result = _batched(jvp, torch.stack(vectors), self.error_class, forward=True)
        for output, (res, exp) in enumerate(zip(result, expected)):
            if not torch.allclose(res, exp):
                raise self.error_class(_batched_mismatch(output, position, res, exp, forward=True))

    def check_undefined_forward_grad(self, func: Callable, inputs: tuple, tangents: Sequence[np.ndarray]) -> None:
        fw = torch.autograd.forward_ad
        positions = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.requires_grad]
        with fw.dual_level():
            duals = list(inputs)
            for p, u in zip(positions, tangents):
                duals[p] = fw.make_dual(inputs[p].detach(), torch.zeros_like(inputs[p]))
                fw.unpack_dual(duals[p]).tangent.copy_(torch.from_numpy(u).reshape(inputs[p].shape))
            for k, p in enumerate(positions):
                kept = duals[p]
                duals[p] = fw.make_dual(inputs[p].detach(), torch.zeros_like(inputs[p]))
                materialized = [o for o in self.call(func, tuple(duals)) if _is_float_or_complex(o)]
                duals[p] = inputs[p].detach()
                absent = [o for o in self.call(func, tuple(duals)) if _is_float_or_complex(o)]
                duals[p] = kept
                for index, (o1, o2) in enumerate(zip(materialized, absent)):
                    t1, t2 = fw.unpack_dual(o1).tangent, fw.unpack_dual(o2).tangent
                    if t1 is not None and t2 is not None and not torch.allclose(t1, t2):
                        raise self.error_class(
                            f"Mismatch in tangent values for output with index: {index} when input: "
                            f"{inputs[p]} has an undefined tangent value. Got: {t1} but expected: {t2} "
                            f"(differentiable input {k}: a zero tangent and an absent tangent must give "
                            f"the same output tangents)"
                        )

    def check_zero_grad_output(self, func: Callable, inputs: tuple, masked: bool) -> None:
        fail = self.error_class
        outputs = _differentiable(self.reference_call(func, inputs))
        wrt = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
        if not wrt:
            raise fail("no Tensors requiring grad found in input")
        zeros = [torch.zeros_like(o, memory_format=torch.legacy_contiguous_format) for o in outputs]
        grads = torch.autograd.grad(outputs, wrt, zeros, retain_graph=True, allow_unused=True)
        for position, (g, x) in enumerate(zip(grads, wrt)):
            if g is None:
                continue
            if g.layout != torch.strided:
                if g.layout != x.layout:
                    raise fail(f"grad is incorrect layout ({g.layout} is not {x.layout})")
                if g.layout == torch.sparse_coo or g.layout in (torch.sparse_csr, torch.sparse_csc):
                    kind = str(g.layout).replace("torch.", "").replace("_coo", "")
                    if g.sparse_dim() != x.sparse_dim():
                        raise fail(
                            f"grad is {kind} tensor, but has incorrect sparse_dim {g.sparse_dim()}, "
                            f"expected {x.sparse_dim()}"
                        )
                    if g.dense_dim() != x.dense_dim():
                        raise fail(
                            f"grad is {kind} tensor, but has incorrect dense_dim {g.dense_dim()}, "
                            f"expected {x.dense_dim()}"
                        )
                g, x = g.to_dense(), x.to_dense()
            is_zero = torch.allclose(g, torch.zeros_like(g)) if masked else bool(g.eq(0).all())
            if not is_zero:
                raise fail(
                    f"backward not multiplied by grad_output: a zero grad_output gave a nonzero "
                    f"gradient for differentiable input {position}"
                )
            if g.dtype != x.dtype:
                raise fail(f"grad is incorrect type ({g.dtype} for an input of {x.dtype})")
            if g.device != x.device:
                raise fail(f"grad is incorrect device ({g.device} for an input on {x.device})")
            if g.size() != x.size():
                raise fail(f"grad is incorrect size ({tuple(g.size())} for an input of {tuple(x.size())})")

    def check_undefined_grad(self, func: Callable, inputs: tuple) -> None:
        fail = self.error_class
        wrt = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
        if not wrt:
            raise fail("no Tensors requiring grad found in input")
        undefined = torch._C._functions.UndefinedGrad

        def differentiable_outputs():
            return [o for o in _differentiable(self.call(func, inputs)) if isinstance(o, torch.Tensor)]

        # All outputs' grads undefined at once, then (with several outputs) one at a time.
        cases = [("all output grads undefined", [undefined()(o) for o in differentiable_outputs()])]
        if len(cases[0][1]) > 1:
            for k in range(len(cases[0][1])):
                outputs = differentiable_outputs()
                outputs[k] = undefined()(outputs[k])
                cases.append((f"the grad of output {k} undefined", outputs))
        for label, outputs in cases:
            zeros = [torch.zeros_like(o, memory_format=torch.legacy_contiguous_format) for o in outputs]
            try:
                grads = torch.autograd.grad(outputs, wrt, zeros, allow_unused=True)
            except RuntimeError as e:
                raise fail(
                    "Expected backward function to handle undefined output grads. Please look at "
                    '"Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'
                    f" (backward raised, with {label}: {type(e).__name__}: {e})"
                ) from e
            for position, g in enumerate(grads):
                if g is not None and not bool(g.eq(0).all()):
                    raise fail(
                        "Expected all input grads to be undefined or zero when all output grads are "
                        'undefined or zero. Please look at "Notes about undefined output gradients" in '
                        f'"tools/autograd/derivatives.yaml" (nonzero grad for differentiable input '
                        f"{position}, with {label})"
                    )

    def grad_function(self, func: Callable, inputs: tuple, grad_outputs: tuple) -> tuple[Callable, tuple]:
        diff_inputs = frozenset(i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.requires_grad)
        diff_grad_outputs = frozenset(
            i for i, g in enumerate(grad_outputs) if isinstance(g, torch.Tensor) and g.requires_grad
        )
        return GradOfOutputs(func, len(inputs), diff_inputs, diff_grad_outputs), inputs + grad_outputs

    def default_grad_outputs(self, func: Callable, inputs: tuple, noncontiguous: bool) -> tuple:
        outputs = _differentiable(self.reference_call(func, inputs))
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

    def format_block(self, block: np.ndarray) -> str:
        return str(torch.from_numpy(np.ascontiguousarray(block)))


BATCHED_GRAD_NOTE = """gradcheck or gradgradcheck failed while testing batched gradient computation: the
backward pass computed for a batch of grad-outputs in one vmap call differs from separate calls,
or vmap could not run it. To skip this test pass check_batched_grad=False (for an OpInfo-based
test: check_batched_grad=False and/or check_batched_gradgrad=False). The usual cause is a
vmap-incompatible operation in the backward formula: see "NOTE: [How to write vmap-compatible
backward formulas]" in PyTorch."""

BATCHED_FORWARD_GRAD_NOTE = """gradcheck failed while testing batched gradient computation with forward-mode
AD (enabled by check_batched_forward_grad=True): the JVPs computed for a batch of tangents in one
vmap call differ from separate calls, or vmap could not run them. To skip this test pass
check_batched_forward_grad=False (for an OpInfo-based test: check_batched_forward_grad=False)."""


def _batched(function: Callable, stacked: torch.Tensor, fail: type[Exception], forward: bool):
    """``function`` vmapped over ``stacked`` with torch's legacy vmap (what gradcheck uses)."""
    from torch._vmap_internals import _vmap

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="There is a performance drop")
        warnings.filterwarnings("ignore", message="Please use `torch.vmap`")
        try:
            return _vmap(function)(stacked)
        except RuntimeError as ex:
            note = BATCHED_FORWARD_GRAD_NOTE if forward else BATCHED_GRAD_NOTE
            raise fail(f"While computing batched gradients, got: {ex}\n\n{note}") from ex


def _batched_mismatch(output: int, position: int, result, expected, forward: bool) -> str:
    note = BATCHED_FORWARD_GRAD_NOTE if forward else BATCHED_GRAD_NOTE
    return f"For output {output} and input {position}:\n\n{note}\n\nGot:\n{result}\n\nExpected:\n{expected}"
