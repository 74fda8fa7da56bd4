"""``distcheck repro``: the script fails exactly as the case failed, or passes where it passed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distcheck.case.judge import distcheck_checker, judge
from distcheck.cli import main
from distcheck.executors.serial import SerialExecutor
from distcheck.reports import repro
from distcheck.suites import CaseId, get_suite


def _script(capsys, argv) -> str:
    assert main(["repro", *argv]) == 0
    return capsys.readouterr().out


def _run(tmp_path, script: str) -> subprocess.CompletedProcess:
    path = tmp_path / "repro.py"
    path.write_text(script)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)


@pytest.mark.slow
def test_a_failing_tensorplay_case_fails_with_the_runs_message(tmp_path, capsys):
    case = "tensorplay-opinfo::mm::complex128::sample0::grad"
    verdict, message = judge(
        get_suite("tensorplay-opinfo").build(CaseId.parse(case)), distcheck_checker(SerialExecutor())
    )
    assert verdict == "fail" and message.startswith("While considering the imaginary part")
    script = _script(capsys, ["mm::complex128::sample0::grad", "--suite", "tensorplay-opinfo"])
    assert "from distcheck import gradcheck, gradgradcheck" in script and "    fast_mode=True," in script
    done = _run(tmp_path, script)
    assert done.returncode == 1 and "passed" not in done.stdout
    assert f"TensorplayGradcheckError: {message}" in done.stderr


@pytest.mark.slow
def test_a_passing_torch_case_passes_with_torchs_own_gradgradcheck(tmp_path, capsys):
    script = _script(capsys, ["torch-opinfo::mul::float64::sample1::gradgrad", "--mode", "slow"])
    assert "from torch.autograd.gradcheck import gradcheck, gradgradcheck" in script
    assert script.count("gradgradcheck(\n") == 2 and "    gen_non_contig_grad_outputs=True," in script
    assert "    fast_mode=False," in script
    done = _run(tmp_path, script)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("passed")


def test_a_case_that_expects_an_error_passes_when_raised(capsys):
    script = _script(capsys, ["torch-opinfo::cdist::float64::sample0::fwgrad"])
    assert "import re\n" in script and "except NotImplementedError as e:" in script
    compile(script, "repro.py", "exec")  # a valid script; running it is the two tests above


def test_the_command_shown_in_reports():
    case = CaseId("torch-opinfo", "nn.functional.conv2d", "float64", "grad", 3)
    assert repro.command(case, "fast") == (
        "distcheck repro torch-opinfo::nn.functional.conv2d::float64::sample3::grad > repro.py && python repro.py"
    )
    assert repro.command(case, "slow").startswith("distcheck repro torch-opinfo::nn.functional.conv2d::")
    assert "--mode slow > repro.py" in repro.command(case, "slow")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope"], "bad case id"),
        (["torch-opinfo::cov::float64::grad"], "is not a runnable case (no sample)"),
        (["torch-opinfo::add::float64::sample0::grad", "--suite", "tensorplay-opinfo"], "not --suite"),
        (["torch-opinfo::addd::float64::sample0::grad"], "unknown op 'addd'"),
        (["torch-opinfo::add::float64::sample9999::grad"], "samples in torch.float64 (asked for sample 9999)"),
        (
            ["my-kernels::badcube::float64::sample1::grad"],
            "case 'my-kernels::badcube::float64::sample1::grad' is of suite 'my-kernels', which is neither built in "
            "nor installed: name it with --suite MODULE:NAME",
        ),
        (["declared::sin::float64::sample0::grad", "--suite", "example-functions"], "not --suite 'example-functions'"),
    ],
)
def test_usage_errors(argv, message, capsys):
    assert main(["repro", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


DECLARED = "tests.suites.declared_suites:suite"  # a suite named "declared", loaded from its module


@pytest.mark.parametrize("text", ["declared::sin::float64::sample0::grad", "sin::float64::sample0::grad"])
def test_a_suite_loaded_from_a_module_is_reproduced_by_its_spec(text, capsys):
    script = _script(capsys, [text, "--suite", DECLARED])
    assert f"case = get_suite({DECLARED!r}, 'fast').build(CaseId.parse('declared::sin::float64::sample0::grad'))" in (
        script
    )
    compile(script, "repro.py", "exec")


def test_commands_name_the_suites_spec_and_device():
    from distcheck.records.case_record import CaseRecord
    from distcheck.reports.console import reproduce_command

    case = CaseId("declared", "wrong", "float64", "grad", 0)
    assert repro.command(case, "fast", DECLARED) == (
        f"distcheck repro --suite {DECLARED} declared::wrong::float64::sample0::grad > repro.py && python repro.py"
    )
    assert repro.command(case, "fast", "declared") == repro.command(case, "fast")  # an installed suite: its name
    assert reproduce_command(CaseRecord(case, "fail"), "slow", DECLARED) == (
        f"distcheck run --suite {DECLARED} --ops wrong --dtypes float64 --checks grad "
        "-k declared::wrong::float64::sample0::grad --serial --mode slow"
    )
    on_gpu = CaseRecord(CaseId("torch-opinfo", "sinh", "float64", "grad", 0, "cuda"), "fail")
    assert reproduce_command(on_gpu, "fast").endswith(
        "-k torch-opinfo::sinh::cuda::float64::sample0::grad --serial --device cuda"
    )
