"""An engine from outside distcheck (tests/engines/toy_engine.py), registered through an entry
point or ``register_engine``, checks functions as the built-in engines do."""

from __future__ import annotations

import numpy as np
import pytest

import distcheck
from distcheck.engines import registry
from distcheck.engines.registry import ENTRY_POINT_GROUP, EngineLoadError, engine_names, register_engine
from tests.engines import toy_engine
from tests.engines.toy_engine import GOOD, TARGET, WRONG, Vec


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry as a new process finds it (and as it was, afterwards)."""
    monkeypatch.setattr(registry, "_sources", {})
    monkeypatch.setattr(registry, "_loaded", dict(registry._loaded))
    monkeypatch.setattr(registry, "_installed_read", False)


@pytest.fixture
def install(tmp_path, monkeypatch, fresh_registry):
    """Install a fake package (its metadata only) registering engines: ``install({name: target})``."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(engines: dict[str, str]) -> None:
        info = tmp_path / "toy_plugin-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 1.0\n")
        lines = "\n".join(f"{name} = {target}" for name, target in engines.items())
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}\n")

    return install


def _x() -> Vec:
    return Vec(np.linspace(0.1, 0.9, 6).reshape(2, 3))


def _check(func) -> bool | str:
    try:
        return distcheck.gradcheck(func, (_x(),))
    except distcheck.GradcheckError as e:
        return str(e)


def test_the_built_in_engines_are_the_registry_s_first(fresh_registry):
    assert engine_names() == ("torch", "tensorplay", "jax", "numpy")
    for source in registry.sources():
        engine = registry.get_engine(source.name)
        assert (engine.name, engine.library, engine.array_type) == (source.name, source.library, source.array_type)


def test_an_installed_engine_checks_its_arrays(install):
    install({"toy": TARGET})
    source = registry.sources()[-1]
    assert (source.name, source.origin, source.library) == ("toy", "package toy-plugin 1.0", None)  # not imported
    assert _check(GOOD) is True
    assert "Jacobian mismatch for output 0 with respect to input 0" in _check(WRONG)
    assert registry.sources()[-1].library == toy_engine.__name__  # read from the class once loaded
    assert registry.get_engine("toy").library_version() is None  # no distribution of that name


def test_a_registered_engine_checks_its_arrays_and_is_named_in_the_error_message(fresh_registry):
    register_engine("toy", TARGET, toy_engine.__name__, "Vec")
    assert _check(GOOD) is True and "Jacobian mismatch" in _check(WRONG)
    with pytest.raises(ValueError, match=r"numpy\.ndarray or tests\.engines\.toy_engine\.Vec\)"):
        distcheck.gradcheck(GOOD, (1.0,))
    register_engine("toy", TARGET, toy_engine.__name__, "Vec")  # again, the same: nothing changes
    with pytest.raises(ValueError, match="engine 'toy' is already registered"):
        register_engine("toy", "elsewhere:Engine", "elsewhere", "Array")


def test_a_broken_installed_engine_fails_in_one_line(install):
    install({"broken": "no_such_module_here:Engine"})
    where = r"\(package toy-plugin 1.0, no_such_module_here:Engine\)"
    with pytest.raises(EngineLoadError, match=rf"^engine 'broken' {where} failed to load: ModuleNotFoundError"):
        registry.get_engine("broken")
