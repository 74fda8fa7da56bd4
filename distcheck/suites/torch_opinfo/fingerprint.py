"""Fingerprints of samples: a hash of everything a gradient check sees in its inputs.

The structure (containers, kwarg names, non-tensor values) and, per tensor, dtype, shape,
strides, layout, ``requires_grad``, conjugate / negative bits and the raw bytes of its values
(the components of a sparse tensor). Equal fingerprints mean the same check of the same numbers.
The device is not part of it: the same numbers on a GPU have the CPU's fingerprint.
"""

from __future__ import annotations

import torch

from distcheck.suites.fingerprint import ADDRESS
from distcheck.suites.fingerprint import fingerprint as structure_fingerprint

_SPARSE_COMPONENTS = {
    torch.sparse_coo: ("_indices", "_values"),
    torch.sparse_csr: ("crow_indices", "col_indices", "values"),
    torch.sparse_bsr: ("crow_indices", "col_indices", "values"),
    torch.sparse_csc: ("ccol_indices", "row_indices", "values"),
    torch.sparse_bsc: ("ccol_indices", "row_indices", "values"),
}


def fingerprint(sample) -> str:
    """The fingerprint (16 hex digits) of an OpInfo sample: its input, args and kwargs."""
    return values_fingerprint((sample.input, tuple(sample.args), dict(sample.kwargs)))


def values_fingerprint(values) -> str:
    """The fingerprint (16 hex digits) of any structure of torch tensors and plain values."""
    return structure_fingerprint(values, torch.Tensor, _feed_tensor)


def _feed_tensor(digest, tensor: torch.Tensor) -> None:
    t = tensor.detach()
    strides = t.stride() if t.layout == torch.strided else ()
    digest.update(
        f"T {t.dtype} {tuple(t.shape)} {strides} {t.layout} grad={tensor.requires_grad} "
        f"conj={t.is_conj()} neg={t.is_neg()}".encode()
    )
    if t.layout == torch.strided:
        _feed_values(digest, t)
    elif t.layout in _SPARSE_COMPONENTS:
        for name in _SPARSE_COMPONENTS[t.layout]:
            _feed_values(digest, getattr(t, name)())
    else:
        digest.update(ADDRESS.sub("", repr(t)).encode())


def _feed_values(digest, t: torch.Tensor) -> None:
    t = t.resolve_conj().resolve_neg().contiguous().reshape(-1)
    if t.numel():
        if t.device.type != "cpu":  # a device tensor's bytes, copied to the host once
            t = t.cpu()
        digest.update(t.view(torch.uint8).numpy())  # the bytes, read in place
