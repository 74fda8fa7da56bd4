"""Math kits: what the catalogue's library-neutral math needs from one library.

A kit hands out the library's ops by name (``kit.sin`` is ``torch.sin``, ``tensorplay.sin`` or
``jax.numpy.sin``) and supplies the few things that differ between libraries: an array of given
values, a scalar read back to Python (``item``, which breaks under vmap), nondeterministic noise,
and :meth:`function`, the catalogue entry made a function with hand-written derivatives in this
library. Functions are built once per kit and published in the kit's module (so they pickle by
reference, as Ray tasks need).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.catalogue.functions import CUSTOM, Custom


class Kit:
    """The common part: ops by name, and functions built on demand and published in ``module``."""

    def __init__(self, lib: Any, module: str):
        self.lib, self.module = lib, module
        self._built: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def item(self, x) -> float:
        return x.item()

    def published(self, name: str) -> Any:
        """The catalogue entry ``name`` as this library's object (a Function class or a function)."""
        if name not in self._built:
            built = self.build(name, CUSTOM[name])
            built.__module__, built.__qualname__ = self.module, name
            setattr(sys.modules[self.module], name, built)
            self._built[name] = built
        return self._built[name]

    def function(self, name: str) -> Callable:
        """The catalogue entry ``name`` as a callable of this library's tensors."""
        return self.published(name)

    def publish_all(self) -> None:
        for name in CUSTOM:
            self.published(name)

    def build(self, name: str, spec: Custom) -> Any:
        raise NotImplementedError


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


class AutogradFunctionKit(Kit):
    """torch and tensorplay: a catalogue entry becomes an ``autograd.Function`` subclass (the two
    libraries share that API; ``function`` is its ``apply``)."""

    def function(self, name: str) -> Callable:
        return self.published(name).apply

    def tensor(self, values: np.ndarray, requires_grad: bool = True, transposed: bool = False) -> Any:
        """A leaf tensor holding a copy of ``values`` (transposed: a transposed view of it)."""
        x = self.lib.tensor(np.array(values, copy=True))
        if transposed:
            x = x.t()
        return x.requires_grad_() if requires_grad else x

    def all_zero(self, g):
        return (g == 0).all().to(g.dtype)

    def build(self, name: str, spec: Custom) -> type:
        kit = self

        def forward(ctx, *inputs):
            if spec.undefined_grads:
                ctx.set_materialize_grads(False)
            outputs = spec.forward(kit, *inputs)
            ctx.save_for_backward(*inputs, *_as_tuple(outputs))
            ctx.n_inputs = len(inputs)
            if spec.jvp is not None:
                ctx.inputs = inputs
            return outputs

        def backward(ctx, *grads):
            saved = ctx.saved_tensors
            return spec.backward(kit, saved[: ctx.n_inputs], saved[ctx.n_inputs :], *grads)

        namespace = {"__doc__": spec.doc, "forward": staticmethod(forward), "backward": staticmethod(backward)}
        if spec.jvp is not None:
            namespace["jvp"] = staticmethod(lambda ctx, *tangents: spec.jvp(kit, ctx.inputs, *tangents))
        return type(name, (self.lib.autograd.Function,), namespace)


class TorchKit(AutogradFunctionKit):
    def array(self, values, like):
        return self.lib.tensor(values, dtype=like.dtype)

    def noise(self, like):
        """Uniform [0, 1) of ``like``'s shape, real, from torch's global RNG."""
        return self.lib.rand(like.shape, dtype=like.dtype.to_real())


class TensorplayKit(AutogradFunctionKit):
    def array(self, values, like):
        return self.lib.tensor(np.array(values, copy=True), dtype=like.dtype)

    def noise(self, like):
        """Uniform [0, 1) of ``like``'s shape, float64, from numpy's global RNG (``tp.rand``
        follows no generator)."""
        return self.lib.tensor(np.random.rand(*tuple(like.shape)))


class JaxKit(Kit):
    """JAX: a catalogue entry becomes a ``jax.custom_vjp`` function whose bwd is the entry's
    backward mapped to JAX's convention (``ct ↦ conj(backward(conj(ct)))``, see
    :mod:`distcheck.engines.jax_engine`), or, for an entry with a jvp, a ``jax.custom_jvp``
    function: JAX takes a custom jvp *or* a custom vjp, and derives reverse mode from a custom jvp
    by transposing it, so the entry's backward is then not used. JAX has no undefined
    grad-outputs: a bwd always receives zeros."""

    def array(self, values, like):
        return self.lib.asarray(values, dtype=like.dtype)

    def tensor(self, values: np.ndarray, requires_grad: bool = True, transposed: bool = False) -> Any:
        """A ``jax.Array`` of ``values`` (differentiated if float or complex: JAX arrays carry no
        ``requires_grad``, so ``requires_grad=False`` gives a numpy constant)."""
        if not requires_grad:
            return np.array(values, copy=True)
        x = self.lib.asarray(values)
        return x.T if transposed else x

    def noise(self, like):
        """Uniform [0, 1) of ``like``'s shape from numpy's global RNG: host-side randomness, so a
        new draw per eager call (JAX's own ``jax.random`` is a pure function of its key)."""
        return self.lib.asarray(np.random.rand(*like.shape))

    def all_zero(self, g):
        return self.lib.all(g == 0).astype(g.dtype)

    def t(self, x):
        return self.lib.transpose(x)

    def build(self, name: str, spec: Custom) -> Callable:
        import jax

        kit, conj = self, self.lib.conj

        def forward(*inputs):
            return spec.forward(kit, *inputs)

        if spec.jvp is not None:
            function = jax.custom_jvp(forward)
            function.defjvp(lambda primals, tangents: (forward(*primals), spec.jvp(kit, primals, *tangents)))
            return function

        def fwd(*inputs):
            outputs = forward(*inputs)
            return outputs, (inputs, _as_tuple(outputs))

        def bwd(saved, cotangents):
            inputs, outputs = saved
            grads = spec.backward(kit, inputs, outputs, *(conj(c) for c in _as_tuple(cotangents)))
            return tuple(conj(g) for g in _as_tuple(grads))

        function = jax.custom_vjp(forward)
        function.defvjp(fwd, bwd)
        return function
