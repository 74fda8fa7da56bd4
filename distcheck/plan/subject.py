"""What a check's work units run against: the engine, functions and inputs, shipped once."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from distcheck.engines.registry import EngineTicket
from distcheck.kinds import VariantKey


@dataclass(frozen=True)
class Variant:
    """One function and the inputs it is checked at.

    A check has several variants: the function itself, the real and imaginary parts of its
    complex outputs, and so on. Units name the variant they run by key.
    """

    func: Callable
    inputs: tuple

    def __reduce__(self):
        # Some tensors lose requires_grad when pickled (torch 2.13's sparse COO tensors do):
        # the flags travel alongside and are restored on arrival. A torch view made in no-grad
        # mode of a tensor that requires grad gets no gradient where it is (its Jacobian is
        # zero), but would arrive as a leaf that gets one: it is made such a view again.
        # Tensors that share a storage (overlapping views of one base, a complex tensor and its
        # real part) would arrive each with a copy of its own, and finite differences of one
        # would no longer reach the others: they travel as views of one storage, sent once.
        # (Not the tensors ``func`` holds: they travel with it, each with a storage of its own.)
        flags = tuple(getattr(x, "requires_grad", None) is True for x in self.inputs)
        return _arriving_variant, (self.func, _sharing(self.inputs), flags, _no_grad_views(self.inputs))


def _no_grad_views(inputs: tuple) -> tuple[int, ...]:
    if "torch" not in sys.modules:  # no torch tensor among the inputs
        return ()
    from distcheck.engines.torch_tensors import is_no_grad_view

    return tuple(k for k, x in enumerate(inputs) if is_no_grad_view(x))


def _arriving_variant(
    func: Callable, inputs: tuple, requires_grad: tuple[bool, ...], no_grad_views: tuple[int, ...] = ()
) -> Variant:
    if any(isinstance(x, _StorageView) for x in inputs):
        inputs = _each_once(inputs, lambda k, x: isinstance(x, _StorageView), lambda x: x.tensor())
    for x, flag in zip(inputs, requires_grad):
        if flag and not x.requires_grad:
            x.requires_grad_()
    if no_grad_views:
        from distcheck.engines.torch_tensors import as_no_grad_view

        inputs = _each_once(inputs, lambda k, x: k in no_grad_views, as_no_grad_view)
    return Variant(func, inputs)


@dataclass(frozen=True)
class _SharedStorage:
    """A storage that several inputs view: its bytes, as a uint8 tensor over all of it."""

    data: Any


@dataclass(frozen=True)
class _StorageView:
    """An input that shares its storage with another, as it travels: which storage, and where
    and how it views it (the conjugate and negative bits are a view's, not its storage's)."""

    storage: _SharedStorage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: Any
    conj: bool
    neg: bool

    @classmethod
    def of(cls, storage: _SharedStorage, x) -> _StorageView:
        """How tensor ``x`` views ``storage`` (its storage)."""
        return cls(storage, x.storage_offset(), tuple(x.shape), x.stride(), x.dtype, x.is_conj(), x.is_neg())

    def tensor(self):
        import torch

        data = self.storage.data
        t = torch.empty(0, dtype=self.dtype, device=data.device)
        t.set_(data.untyped_storage(), self.offset, self.size, self.stride)
        if self.neg:
            t = torch._neg_view(t)
        if self.conj:
            t = t.conj()
        return t


def _sharing(inputs: tuple) -> tuple:
    """``inputs``, those strided torch tensors that share a storage with another replaced by
    :class:`_StorageView` s of one :class:`_SharedStorage` (the same object for each: pickled once)."""
    if "torch" not in sys.modules:  # no torch tensor among the inputs
        return inputs
    import torch

    groups: dict[tuple, list[int]] = {}
    for k, x in enumerate(inputs):
        if type(x) is not torch.Tensor or x.layout != torch.strided or x.is_meta or x._is_zerotensor():
            continue
        try:
            storage = x.untyped_storage()
        except (RuntimeError, NotImplementedError):  # a tensor without storage
            continue
        if storage.nbytes():
            groups.setdefault((str(x.device), storage.data_ptr(), storage.nbytes()), []).append(k)
    sent = inputs
    for positions in groups.values():
        if len({id(inputs[k]) for k in positions}) < 2:  # one tensor (perhaps passed twice): pickle keeps it
            continue
        first = inputs[positions[0]]
        nbytes = first.untyped_storage().nbytes()
        data = torch.empty(0, dtype=torch.uint8, device=first.device)
        data.set_(first.untyped_storage(), 0, (nbytes,), (1,))
        viewed = functools.partial(_StorageView.of, _SharedStorage(data))
        # one view per tensor: an input passed twice arrives as one
        sent = _each_once(sent, lambda k, x, members=frozenset(positions): k in members, viewed)
    return sent


def _each_once(inputs: tuple, chosen: Callable, made: Callable) -> tuple:
    """``inputs``, each chosen one replaced by ``made(x)``, once per object: an input passed
    twice stays one object, as it was where it came from."""
    done: dict[int, Any] = {}
    out = []
    for k, x in enumerate(inputs):
        if chosen(k, x):
            if id(x) not in done:
                done[id(x)] = made(x)
            x = done[id(x)]
        out.append(x)
    return tuple(out)


@dataclass
class Subject:
    """Everything units need, sent to workers once per check (never once per unit).

    ``data`` holds arrays that units share (random vectors, grad-outputs), by key.
    ``costs`` is what the planner measured for its chunking policy (a ``builder.Costs``: one
    evaluation, one backward pass), if it did: executors use it to group small units into tasks.
    """

    engine: str
    variants: dict[VariantKey, Variant]
    data: dict[str, Any] = field(default_factory=dict)
    costs: Any = None

    def __reduce__(self):
        # The engine travels first, as a ticket: a worker registers it and restores its state
        # (JAX's 64-bit mode) before it unpickles the inputs, which depend on that state.
        return Subject, (EngineTicket(self.engine), self.variants, self.data, self.costs)
