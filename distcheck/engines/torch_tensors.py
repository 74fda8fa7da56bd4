"""torch tensors as the checker sees them: numpy copies and dtypes, sparse layouts (which
elements finite differences perturb, and the flat dense index of each), and the call of a
checked function with gradients recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from distcheck.engines.tuples import as_tuple

_NUMPY_DTYPES = {
    torch.bfloat16: np.float32,  # numpy has no bfloat16: checked at float32
    torch.complex32: np.complex64,
}

_numpy_dtypes: dict[torch.dtype, np.dtype] = {}  # found once per dtype: every check asks
_torch_dtypes: dict[np.dtype, torch.dtype] = {}


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    if dtype not in _numpy_dtypes:
        found = _NUMPY_DTYPES.get(dtype) or torch.empty((), dtype=dtype).numpy().dtype
        _numpy_dtypes[dtype] = np.dtype(found)
    return _numpy_dtypes[dtype]


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    if dtype not in _torch_dtypes:
        _torch_dtypes[dtype] = torch.from_numpy(np.empty(0, dtype=dtype)).dtype
    return _torch_dtypes[dtype]


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


def wanted_numpy(outputs: tuple, wanted: Sequence[bool]) -> list[np.ndarray | None]:
    """Numpy copies of the wanted tensor outputs (None for the others)."""
    return [to_numpy(o) if want and isinstance(o, torch.Tensor) else None for o, want in zip(outputs, wanted)]


def call(func: Callable, inputs: tuple) -> tuple:
    """``func(*inputs)`` with gradients recorded, as a tuple."""
    if torch.is_grad_enabled():  # the usual case: no context to enter (the call is hot)
        return as_tuple(func(*inputs))
    with torch.enable_grad():
        return as_tuple(func(*inputs))


def tensor_of(array: np.ndarray) -> torch.Tensor:
    """``torch.from_numpy`` of ``array``, copied first if it is read-only (as arrays that Ray
    returns are: torch would warn, and a test run with ``-W error`` would fail on it)."""
    array = np.asarray(array)
    return torch.from_numpy(array if array.flags.writeable else array.copy())


def operator_reducers() -> dict:
    """Pickling by name for torch's operator objects (an ``OpOverloadPacket`` such as
    ``torch.ops.aten.convolution`` and an ``OpOverload`` such as its ``.default``): they hold
    pybind11 function records, which cannot be pickled."""
    return {torch._ops.OpOverloadPacket: _reduce_packet, torch._ops.OpOverload: _reduce_overload}


def _reduce_packet(packet) -> tuple:
    namespace, name = packet._qualified_op_name.split("::")
    return _operator, (namespace, name, None)


def _reduce_overload(overload) -> tuple:
    namespace, name = overload._schema.name.split("::")
    return _operator, (namespace, name, overload._overloadname)


def _operator(namespace: str, name: str, overload: str | None):
    """``torch.ops.<namespace>.<name>[.<overload>]``."""
    packet = getattr(getattr(torch.ops, namespace), name)
    return packet if overload is None else getattr(packet, overload)


def is_no_grad_view(t: Any) -> bool:
    """A tensor that says it requires grad but to which autograd records nothing: a view made
    in no-grad mode of a tensor that requires grad (or of one made to require grad after the
    view). Its gradient is never computed (torch's gradcheck finds its Jacobian zero). Pickled,
    it would arrive as an ordinary leaf that gets one (see :func:`as_no_grad_view`)."""
    if not (isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is None and t._is_view()):
        return False
    try:
        with torch.enable_grad():  # as torch.autograd.graph.get_gradient_edge finds a leaf's edge
            return t.view_as(t).grad_fn.next_functions[0][0] is None
    except Exception:  # a layout without view_as: not such a view
        return False


def as_no_grad_view(t: torch.Tensor) -> torch.Tensor:
    """``t``, as unpickling rebuilds a no-grad view (a leaf that requires grad), made such a
    view again: same storage, size, strides and flags; autograd records nothing to it."""
    if not t.requires_grad:
        t.requires_grad_()
    with torch.no_grad():
        return t.view_as(t)


def is_float_or_complex(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def values(t: torch.Tensor) -> torch.Tensor:
    """A tensor's values: itself if strided, its specified values if sparse."""
    if t.layout == torch.sparse_coo:
        return t._values()
    if t.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        return t.values()
    return t


def perturbable(t: torch.Tensor) -> torch.Tensor:
    """What finite differences perturb in place: the data of a strided tensor, the specified
    values of a sparse one."""
    if t.layout == torch._mkldnn:
        raise NotImplementedError("gradcheck of MKLDNN inputs is not supported")
    return values(t).data


def element_rows(value: torch.Tensor) -> np.ndarray | None:
    """For a sparse tensor, the flat dense index of each of its specified values (in the
    order finite differences perturb them); None for a strided tensor (all elements, in order)."""
    if value.layout == torch.strided:
        return None
    if value.layout == torch.sparse_coo:
        indices, specified = value._indices(), value._values()
    elif value.layout == torch.sparse_csr:
        indices = torch._convert_indices_from_csr_to_coo(value.crow_indices(), value.col_indices())
        specified = value.values()
    elif value.layout == torch.sparse_csc:
        indices = torch._convert_indices_from_csr_to_coo(value.ccol_indices(), value.row_indices(), transpose=True)
        specified = value.values()
    else:
        raise NotImplementedError(f"gradcheck of {value.layout} inputs is not supported (COO, CSR and CSC are)")
    strides = np.cumprod((tuple(value.shape)[1:] + (1,))[::-1])[::-1].astype(np.int64)
    base = indices.t().numpy().astype(np.int64) @ strides[: indices.shape[0]]
    dense = int(np.prod(specified.shape[1:], dtype=np.int64))
    return (base[:, None] + np.arange(dense, dtype=np.int64)[None, :]).reshape(-1)


def densified(x: torch.Tensor) -> torch.Tensor:
    """``x`` with all elements specified: zeros where ``x`` has none, same layout."""
    dense = x.detach().to_dense()
    sparse_dims = x.sparse_dim() if x.layout == torch.sparse_coo else 2
    indices = torch.ones(x.shape[:sparse_dims], dtype=torch.int8).nonzero().t()
    full = torch.sparse_coo_tensor(indices, dense[tuple(indices)], x.shape)._coalesced_(True)
    if x.layout != torch.sparse_coo:
        full = full.to_sparse(layout=x.layout)
    return full.requires_grad_(x.requires_grad)


def grad_layout_error(grad: torch.Tensor, value: torch.Tensor) -> str | None:
    """The zero-grad-output check's complaint about a sparse gradient's layout, or None."""
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
