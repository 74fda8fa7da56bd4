"""The pytest plugin: inert by default; --distcheck-executor / --distcheck-address set where
distcheck's checks run; --distcheck-torch puts distcheck's checks in place of torch's for the
session (same signature, verdicts, exception types) and restores them; the summary line."""

from __future__ import annotations

import importlib
import os
import pathlib
import pwd
import re
import subprocess
import sys

import pytest
import torch

import distcheck.api

pytest_plugins = ["pytester"]

ORIGINAL = (torch.autograd.gradcheck, torch.autograd.gradgradcheck, distcheck.api.resolve)
WRONG_BACKWARD = """
import importlib

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck  # imported after the plugin patched them
from torch.autograd.gradcheck import GradcheckError  # torch's exception type (from the module)


class WrongSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x


def test_wrong_backward_fails_with_torchs_exception_type():
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradcheckError, match="Jacobian mismatch") as raised:
        torch.autograd.gradcheck(WrongSquare.apply, (x,))
    assert type(raised.value).__name__ == "TorchGradcheckError"  # distcheck's, which is also torch's
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_correct_functions_pass_every_way_torch_is_called():
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    module = importlib.import_module("torch.autograd.gradcheck")
    assert gradcheck.distcheck and module.gradcheck.distcheck and module.gradgradcheck.distcheck
    assert torch.autograd.gradcheck(torch.sinh, (x,), fast_mode=True)
    assert gradgradcheck(lambda a: a.tanh() * a, (x,))
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        torch.autograd.gradcheck(torch.sinh, (x.detach(),))
"""


def _run(pytester, *args):
    """Run pytest in this process with ``args``; the plugin's changes must be undone after."""
    environment = {name: os.environ.get(name) for name in ("DISTCHECK_EXECUTOR", "DISTCHECK_RAY_ADDRESS")}
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert (torch.autograd.gradcheck, torch.autograd.gradgradcheck, distcheck.api.resolve) == ORIGINAL
    assert importlib.import_module("torch.autograd.gradcheck").gradcheck is ORIGINAL[0]
    assert {name: os.environ.get(name) for name in environment} == environment
    return result


def _summary(result) -> tuple[str, int, int]:
    lines = [line for line in result.outlines if line.startswith("distcheck: ")]
    assert len(lines) == 1, result.outlines
    found = re.fullmatch(
        r"distcheck: (\d+) gradient check\(s\) ran through distcheck \((\w+)\).* (\d+) task\(s\); their time: .*",
        lines[0],
    )
    assert found, lines[0]
    return found.group(2), int(found.group(1)), int(found.group(3))


def _placed(result) -> tuple[int, int, int, int]:
    """From a Ray session's line: in-process checks (small, unpicklable), checks on Ray."""
    (line,) = [line for line in result.outlines if line.startswith("distcheck: ")]
    found = re.search(
        r": (\d+) in-process \((\d+) under [\d.e-]+ s of estimated work, (?:\d+ before starting Ray paid off, )?"
        r"(\d+) unpicklable\), (\d+) on Ray",
        line,
    )
    assert found, line
    return tuple(map(int, found.groups()))


def _times(result) -> tuple[float, ...]:
    """From the session's line: the replaced torch checks' seconds (in-process, then on Ray)."""
    (line,) = [line for line in result.outlines if line.startswith("distcheck: ")]
    found = re.search(r"; their time: ([\d.]+) s(?: in-process, ([\d.]+) s on Ray)?$", line)
    assert found, line
    return tuple(float(g) for g in found.groups() if g is not None)


def test_the_line_gives_the_time_torchs_checks_took(pytester):
    pytester.makepyfile(
        """
        import time
        import torch

        def slow_sin(x):
            time.sleep(0.05)
            return x.sin()

        def test_slow():
            x = torch.randn(2, dtype=torch.float64, requires_grad=True)
            assert torch.autograd.gradcheck(slow_sin, (x,))  # 4 evaluations or more, 0.05 s each
        """
    )
    result = _run(pytester, "--distcheck-torch")
    result.assert_outcomes(passed=1)
    (seconds,) = _times(result)
    assert seconds >= 0.2


def test_inert_unless_asked(pytester):
    pytester.makepyfile(
        """
        import os
        import torch

        def test_untouched():
            assert not getattr(torch.autograd.gradcheck, "distcheck", False)
            assert "DISTCHECK_EXECUTOR" not in os.environ
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    assert not any(line.startswith("distcheck: ") for line in result.outlines)


def test_loading_the_plugin_imports_neither_torch_nor_ray():
    code = "import sys, distcheck.pytest_plugin; print(sorted({'torch', 'ray'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


SMALL_CHECKS_ONLY = """
import sys

import torch
from torch.autograd import gradcheck, gradgradcheck


def test_small_checks():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert gradcheck(torch.sin, (x,)) and gradgradcheck(torch.sin, (x,))


def test_then_ray_was_never_imported():
    assert not any(name == "ray" or name.startswith("ray.") for name in sys.modules)
"""


def test_a_session_of_small_checks_on_ray_never_imports_ray(pytester):
    """Importing Ray costs a process over half a second: the executor decides that a check is
    small without it, and the plugin's by-value registration of test modules waits for the
    first check that goes to Ray."""
    pytester.makepyfile(SMALL_CHECKS_ONLY)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--distcheck-torch", "--distcheck-executor", "ray")
    result.assert_outcomes(passed=2)
    assert _placed(result) == (2, 2, 0, 0)


def test_torch_checks_through_distcheck_in_process(pytester):
    pytester.makepyfile(WRONG_BACKWARD)
    result = _run(pytester, "--distcheck-torch")
    result.assert_outcomes(passed=2)
    where, checks, tasks = _summary(result)
    # gradcheck (raises), gradcheck (False), then gradcheck, gradgradcheck and a refused check
    assert (where, checks) == ("serial", 5) and tasks >= 4


def test_executor_option_sets_where_distcheck_checks_run(pytester):
    pytester.makepyfile(
        """
        import os
        import torch
        import distcheck

        def test_env():
            assert os.environ["DISTCHECK_EXECUTOR"] == "serial"
            assert not getattr(torch.autograd.gradcheck, "distcheck", False)  # torch's are left alone
            x = torch.randn(3, dtype=torch.float64, requires_grad=True)
            assert distcheck.gradcheck(torch.sin, (x,)) and torch.autograd.gradcheck(torch.sin, (x,))
        """
    )
    result = _run(pytester, "--distcheck-executor", "serial")
    result.assert_outcomes(passed=1)
    assert _summary(result)[:2] == ("serial", 1)


def test_the_environment_variable_still_chooses_the_executor(pytester, monkeypatch):
    monkeypatch.setenv("DISTCHECK_EXECUTOR", "serial")
    pytester.makepyfile(WRONG_BACKWARD)
    result = _run(pytester, "--distcheck-torch", "-k", "correct")
    result.assert_outcomes(passed=1, deselected=1)
    assert _summary(result)[:2] == ("serial", 3)


def test_an_address_needs_ray(pytester):
    pytester.makepyfile("def test_nothing(): pass")
    result = _run(pytester, "--distcheck-executor", "serial", "--distcheck-address", "auto")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--distcheck-address needs --distcheck-executor ray*"])


@pytest.mark.slow
def test_with_xdist_the_counts_of_every_worker_are_summed(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(WRONG_BACKWARD)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--distcheck-torch")
    result.assert_outcomes(passed=2)
    assert any(
        line.startswith("distcheck: 5 gradient check(s) ran through distcheck (serial) over 2 xdist workers")
        for line in result.outlines
    ), result.outlines


@pytest.mark.slow
def test_with_xdist_and_ray_without_an_address_one_ray_for_the_session(pytester, monkeypatch, tmp_path):
    """The controller starts one local Ray, every xdist worker joins it (one intra-op thread
    each); the controller stops it at the end."""
    pytest.importorskip("xdist")
    for name in ("DISTCHECK_RAY_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SEEN", str(tmp_path / "seen"))
    pytester.makepyfile(
        """
        import os
        import ray
        import torch

        def test_a():
            x = torch.randn(6, dtype=torch.float64, requires_grad=True)
            assert torch.autograd.gradcheck(torch.sinh, (x,))
            assert torch.get_num_threads() == 1
            with open(os.environ["SEEN"], "a") as f:
                f.write(f"{os.getpid()} {ray.get_runtime_context().gcs_address}\\n")

        test_b = test_a
        """
    )
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--distcheck-torch",
        "--distcheck-executor",
        "ray",
        "--distcheck-local-below",
        "0",
    )
    result.assert_outcomes(passed=2)
    seen = [line.split() for line in (tmp_path / "seen").read_text().splitlines()]
    assert len({pid for pid, _ in seen}) == 2 and len({address for _, address in seen}) == 1
    assert "over 2 xdist workers: 0 in-process (0 under 0.0 s of estimated work, 0 unpicklable), 2 on Ray" in (
        result.stdout.str()
    )
    host, port = seen[0][1].rsplit(":", 1)
    import socket

    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=5):
        pass  # the session's Ray is gone


@pytest.mark.slow
def test_with_xdist_and_ray_a_session_of_small_checks_starts_no_ray(pytester, monkeypatch, tmp_path):
    """The controller starts the session's Ray when a worker first sends a check there: with
    every check in-process, no process of the session imports Ray, and none starts one. The
    controller runs no test: it imports neither torch nor Ray (seconds of CPU beside the workers)."""
    pytest.importorskip("xdist")
    for name in ("DISTCHECK_RAY_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CONTROLLER_MODULES", str(tmp_path / "controller"))
    pytester.makeconftest(
        """
        import os
        import sys

        def pytest_unconfigure(config):
            if not hasattr(config, "workerinput"):  # the xdist controller
                with open(os.environ["CONTROLLER_MODULES"], "w") as f:
                    f.write(" ".join(sorted({"torch", "ray"} & set(sys.modules))))
        """
    )
    pytester.makepyfile(
        """
        import os
        import sys

        import torch

        def test_a():
            x = torch.randn(4, dtype=torch.float64, requires_grad=True)
            assert torch.autograd.gradcheck(torch.sin, (x,))
            assert not any(name == "ray" or name.startswith("ray.") for name in sys.modules)
            assert not os.listdir(os.environ["DISTCHECK_RAY_SESSION"])  # no worker asked for Ray

        test_b = test_a
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--distcheck-torch", "--distcheck-executor", "ray"
    )
    result.assert_outcomes(passed=2)
    assert "over 2 xdist workers: 2 in-process (2 under 1.0 s of estimated work, 0 unpicklable), 0 on Ray" in (
        result.stdout.str()
    )
    assert (tmp_path / "controller").read_text() == ""


@pytest.mark.ray
@pytest.mark.slow
def test_with_xdist_and_an_address_every_worker_joins_that_ray(pytester, ray_cluster, monkeypatch):  # noqa: F811
    pytest.importorskip("xdist")
    address = ray_cluster.get_runtime_context().gcs_address
    monkeypatch.setenv("EXPECTED_RAY", address)
    token = pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir, ".ray", "auth_token")  # pytester moved $HOME
    if token.exists() and "RAY_AUTH_TOKEN_PATH" not in os.environ:
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    pytester.makepyfile(
        """
        import os
        import ray
        import torch

        def test_a():
            x = torch.randn(6, dtype=torch.float64, requires_grad=True)
            assert torch.autograd.gradcheck(torch.sinh, (x,))
            assert ray.get_runtime_context().gcs_address == os.environ["EXPECTED_RAY"]

        test_b = test_a
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--distcheck-torch", "--distcheck-address", address
    )
    result.assert_outcomes(passed=2)
    assert "distcheck: 2 gradient check(s) ran through distcheck (ray) over 2 xdist workers" in result.stdout.str()


@pytest.mark.ray
def test_torch_checks_on_ray(pytester, ray_cluster):  # noqa: F811
    """On the session's Ray (joined again: it is initialized); the test module's autograd
    Function travels by value (the workers started before the module existed)."""
    pytester.makepyfile(
        WRONG_BACKWARD
        + """

def test_on_ray():
    import distcheck.api

    assert distcheck.api.resolve(None).name == "ray"
    x = torch.randn(30, 20, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.sinh, (x,))
"""
    )
    result = _run(pytester, "--distcheck-torch", "--distcheck-executor", "ray", "--distcheck-local-below", "0")
    result.assert_outcomes(passed=3)
    where, checks, tasks = _summary(result)
    assert (where, checks) == ("ray", 7) and tasks >= 5
    # no threshold: every check that reaches the executor goes to Ray (the refused one does not)
    placed = _placed(result)
    assert placed[:3] == (0, 0, 0) and placed[3] >= 5
    in_process, on_ray = _times(result)
    assert on_ray > 0 and in_process < on_ray  # in-process: the refused check alone


UNPICKLABLE = """
import torch


class Unpicklable:
    def __call__(self, x):
        return x.tanh()

    def __reduce__(self):
        raise TypeError("not pickleable")


def test_small_and_unpicklable():
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch.sin, (x,))
    assert torch.autograd.gradcheck(Unpicklable(), (x,))
"""


@pytest.mark.ray
def test_small_checks_in_process_unpicklable_ones_too(pytester, ray_cluster):  # noqa: F811
    pytester.makepyfile(UNPICKLABLE)
    result = _run(pytester, "--distcheck-torch", "--distcheck-executor", "ray", "--distcheck-local-below", "1e9")
    result.assert_outcomes(passed=1)
    assert _placed(result) == (2, 2, 0, 0)  # small: decided before anything is pickled
    result = _run(pytester, "--distcheck-torch", "--distcheck-executor", "ray", "--distcheck-local-below", "0")
    result.assert_outcomes(passed=1)
    assert _placed(result) == (1, 0, 1, 1)


RNG_AFTER_CHECKS = """
import hashlib
import os


def test_checks_then_next_samples():
    torch.manual_seed(3)
    x, y = (torch.randn(5, dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert torch.autograd.gradcheck(lambda a, b: (a * b.exp(), a.sum() * b), (x, y), check_batched_grad=True)
    # fails at its Jacobian, before torch's batched-gradient check draws anything
    assert not torch.autograd.gradcheck(WrongSquare.apply, (x,), check_batched_grad=True, raise_exception=False)
    assert torch.autograd.gradgradcheck(lambda a: a.sin() * a, (x,), check_batched_grad=True)
    state = hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()
    with open(os.environ["RNG_STATE_FILE"], "a") as f:
        f.write(state + "\\n")
"""


@pytest.mark.ray
def test_the_global_rng_after_checks_is_torchs_in_process_and_on_ray(pytester, ray_cluster, monkeypatch, tmp_path):  # noqa: F811
    """A test draws its next samples from torch's global RNG after its checks: under the
    plugin it must be where torch's own checks leave it, passing or failing, wherever they ran."""
    pytester.makepyfile(WRONG_BACKWARD + RNG_AFTER_CHECKS)
    states = tmp_path / "states"
    monkeypatch.setenv("RNG_STATE_FILE", str(states))
    _run(pytester, "-k", "next_samples").assert_outcomes(passed=1, deselected=2)  # torch's checks
    _run(pytester, "-k", "next_samples", "--distcheck-torch").assert_outcomes(passed=1, deselected=2)  # in-process
    for below in ("1e9", "0"):  # Ray's executor: in-process, on Ray
        args = ("--distcheck-torch", "--distcheck-executor", "ray", "--distcheck-local-below", below)
        _run(pytester, "-k", "next_samples", *args).assert_outcomes(passed=1, deselected=2)
    torchs, *ours = states.read_text().split()
    assert ours == [torchs] * 3


from tests.executors.conftest import ray_cluster  # noqa: E402, F401 (the session's Ray)
