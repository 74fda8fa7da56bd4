"""Engines: adapters from autodiff libraries to the checker (the interface:
:mod:`distcheck.engines.base`; every engine known: :mod:`distcheck.engines.registry`), and what
is written once on them as free functions (the checks, complex parts, Jacobian rows and columns,
the reference-call scope)."""

from __future__ import annotations

from distcheck.engines.base import Engine, TensorInfo
from distcheck.engines.reference import reference_scope
from distcheck.engines.registry import engine_for, engine_of, get_engine, register_engine

__all__ = ["Engine", "TensorInfo", "engine_for", "engine_of", "get_engine", "reference_scope", "register_engine"]
