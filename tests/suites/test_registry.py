"""The suite registry: built-in suites, installed suites (entry points), MODULE:NAME specs,
broken plugins, and suites that pickle as where they came from."""

from __future__ import annotations

import pickle

import pytest

from distcheck import cli
from distcheck.suites import Selection, SuiteLoadError, UsageError, get_suite, spec_of, suite_names, suite_sources
from distcheck.suites.declare import DeclaredSuite
from distcheck.suites.loading import ENTRY_POINT_GROUP, LoadedSuite, is_spec
from tests.suites import declared_suites

SPEC = "tests.suites.declared_suites:suite"


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install fake packages (their metadata only) that register suites: ``install(package,
    {name: target})``."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(package: str, suites: dict[str, str]) -> None:
        info = tmp_path / f"{package}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
        lines = "\n".join(f"{name} = {target}" for name, target in suites.items())
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}\n")

    return install


def test_built_in_and_installed_suites_with_their_origin():
    sources = {source.name: source for source in suite_sources()}
    assert sources["torch-opinfo"].origin == "built in"
    assert sources["torch-opinfo"].target == "distcheck.suites.torch_opinfo:TorchOpInfoSuite"
    example = sources["example-functions"]  # examples/autograd-functions, installed by `make install`
    assert example.origin == "package distcheck-example-functions 0.1.0"
    assert example.target == "distcheck_example_functions.gradchecks:suite"
    assert suite_names()[:2] == ("torch-opinfo", "tensorplay-opinfo")


def test_an_installed_suite_loads_by_its_name():
    suite = get_suite("example-functions", "slow")
    assert isinstance(suite, LoadedSuite) and isinstance(suite.suite, DeclaredSuite)
    assert (suite.name, suite.mode, suite.engine, suite.spec) == (
        "example-functions",
        "slow",
        "torch",
        "example-functions",
    )


@pytest.mark.parametrize(
    ("spec", "name", "mode"),
    [
        (SPEC, "declared", "slow"),  # a suite object, in another mode through with_mode
        ("tests.suites.declared_suites:SinSuite", "sin-class", "slow"),  # a Suite class
        ("tests.suites.declared_suites:factory", "from-factory", "slow"),  # a factory
        ("tests.suites.declared_suites:fixed", "sin-class", "slow"),  # a suite object in its own mode
    ],
)
def test_module_name_specs(spec, name, mode):
    suite = get_suite(spec, mode)
    assert (suite.name, suite.mode, suite.spec) == (name, mode, spec)
    assert suite.source.origin == "module"
    assert next(iter(suite.cases(Selection(checks=("grad",))))).id.suite == name


@pytest.mark.parametrize("spec", ["torch-opinfo", "example-functions", SPEC, "tests.suites.declared_suites:SinSuite"])
def test_the_spec_of_a_suite_loads_it_again(spec):
    suite = get_suite(spec, "slow")
    assert spec_of(suite) == spec
    again = get_suite(spec_of(suite), "slow")
    assert (again.name, again.mode) == (suite.name, suite.mode)


def test_a_suite_pickles_as_its_spec_and_is_rebuilt_once_per_process():
    suite = get_suite(SPEC)
    data = pickle.dumps(suite)
    assert b"WrongScale" not in data and len(data) < 400  # the spec and mode, not the functions
    again = pickle.loads(data)
    assert isinstance(again, LoadedSuite) and again.spec == SPEC and again.mode == "fast"
    assert again.suite is declared_suites.suite  # the module's object itself
    assert pickle.loads(data).suite is again.suite
    assert pickle.loads(pickle.dumps(get_suite(SPEC, "slow"))).suite.mode == "slow"


def test_a_declared_suite_also_pickles_by_value():
    again = pickle.loads(pickle.dumps(declared_suites.suite))
    assert again == declared_suites.suite


def test_optional_methods_stay_optional_through_the_wrapper():
    assert hasattr(get_suite(SPEC), "groups")
    assert not hasattr(get_suite("tests.suites.declared_suites:SinSuite"), "groups")
    get_suite("tests.suites.declared_suites:SinSuite").prepare()


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            "no_such_module_xyz:suite",
            ["'no_such_module_xyz:suite' (module", "ModuleNotFoundError", "no_such_module_xyz"],
        ),
        ("tests.suites.declared_suites:nothing", ["AttributeError", "nothing"]),
        (
            "tests.suites.declared_suites:failing_factory",
            ["failed to build in mode 'fast'", "KeyError: 'no configuration'"],
        ),
        (
            "tests.suites.declared_suites:not_a_suite",
            ["is not a suite: a int without name, mode, engine, cases, build"],
        ),
    ],
)
def test_a_broken_suite_is_one_line_naming_the_exception(spec, words):
    with pytest.raises(SuiteLoadError) as raised:
        get_suite(spec)
    message = str(raised.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_a_suite_object_in_another_mode_without_with_mode():
    with pytest.raises(UsageError, match="runs in mode 'slow' only"):
        get_suite("tests.suites.declared_suites:fixed", "fast")


def test_unknown_names_and_modes():
    with pytest.raises(
        UsageError, match=r"unknown suite 'nope' \(known: torch-opinfo, .*example-functions.*MODULE:NAME"
    ):
        get_suite("nope")
    with pytest.raises(UsageError, match="unknown mode"):
        get_suite(SPEC, "medium")
    assert is_spec("a.b:c") and not is_spec("torch-opinfo") and not is_spec(":c") and not is_spec("a::b")


def test_a_broken_plugin_names_its_package_and_breaks_nothing_else(installed, capsys):
    installed("broken_plugin", {"broken": "broken_plugin_module_xyz:suite"})
    sources = {source.name: source for source in suite_sources()}
    assert sources["broken"].origin == "package broken_plugin 1.0"  # listed, not imported
    with pytest.raises(SuiteLoadError) as raised:
        get_suite("broken")
    assert str(raised.value) == (
        "suite 'broken' (package broken_plugin 1.0, broken_plugin_module_xyz:suite) failed to load: "
        "ModuleNotFoundError: No module named 'broken_plugin_module_xyz'"
    )
    assert cli.main(["list", "--suite", "broken"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("distcheck: error: suite 'broken' (package broken_plugin 1.0") and err.count("\n") == 1
    assert "Traceback" not in err
    assert cli.main(["list", "--suites"]) == 0
    out = capsys.readouterr().out
    assert "broken  " in out and "package broken_plugin 1.0 (broken_plugin_module_xyz:suite)" in out
    assert "example-functions" in out and "built in" in out
    assert cli.main(["list", "--suite", "example-functions", "--ops", "cube", "--dtypes", "float64"]) == 0
    assert "example-functions::cube::float64::sample0::grad" in capsys.readouterr().out


def test_a_plugin_suite_runs_from_the_command_line(installed, capsys, tmp_path):
    installed("more_suites", {"declared": SPEC})
    argv = ["run", "--suite", "declared", "--serial", "--ops", "sin,wrong", "--checks", "grad", "--out", str(tmp_path)]
    status = cli.main(argv)
    assert status == 1  # op wrong fails
    out = capsys.readouterr().out
    assert "declared::wrong::float64::sample0::grad" in out


def test_an_installed_suite_is_registered_under_its_own_name(installed):
    installed("misnamed", {"other-name": SPEC})
    with pytest.raises(SuiteLoadError, match="is a suite named 'declared': an installed suite's entry-point name"):
        get_suite("other-name")


def test_two_packages_registering_one_name(installed):
    installed("first_pkg", {"twice": SPEC})
    installed("second_pkg", {"twice": "tests.suites.declared_suites:factory"})
    with pytest.raises(UsageError, match="'twice' is registered by more than one package: package ") as raised:
        get_suite("twice")
    assert "package first_pkg 1.0 (tests.suites.declared_suites:suite)" in str(raised.value)
    assert "package second_pkg 1.0 (tests.suites.declared_suites:factory)" in str(raised.value)


def test_an_installed_suite_cannot_shadow_a_built_in_one(installed):
    installed("shadow", {"torch-opinfo": SPEC})
    origins = [source.origin for source in suite_sources() if source.name == "torch-opinfo"]
    assert origins == ["built in", "package shadow 1.0, shadowed by the built-in suite"]
    assert get_suite("torch-opinfo").__class__.__name__ == "TorchOpInfoSuite"
    assert suite_names().count("torch-opinfo") == 1


def test_listing_suites_imports_no_plugin():
    import subprocess
    import sys

    code = "import sys; from distcheck import cli; cli.main(['list', '--suites']); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False") and "example-functions" in out
