"""torch-opinfo on device cuda, from metadata only (no GPU needed): the dtypes, skips and xfails
of PyTorch's ``*CUDA`` test classes, and the case ids that name the device."""

from __future__ import annotations

import pickle

import pytest
import torch

from distcheck.suites import CaseId, GroupInfo, Selection, get_suite
from distcheck.suites.torch_opinfo.database import op_named
from distcheck.suites.torch_opinfo.status import checked_dtypes, pytorch_status


def test_device_type_decorators_are_read_for_cuda():
    op = op_named("div.trunc_rounding")  # DecorateInfo(unittest.skip, ..., device_type="cpu") on test_fn_grad
    assert pytorch_status(op, "grad", torch.float64)[0] == "skipped"
    assert pytorch_status(op, "grad", torch.float64, "cuda") == ("run", "")


def test_skip_cuda_if_no_magma_reads_this_torch():
    status, reason = pytorch_status(op_named("cholesky"), "grad", torch.float64, "cuda")
    assert pytorch_status(op_named("cholesky"), "grad", torch.float64) == ("run", "")
    if torch.cuda.has_magma:
        assert status == "run"
    else:
        assert (status, reason) == ("skipped", "no MAGMA library detected")


def test_backward_dtypes_of_cuda():
    op = op_named("nn.functional.batch_norm.without_cudnn")
    assert checked_dtypes(op, (torch.float64,)) == []
    assert checked_dtypes(op, (torch.float64,), "cuda") == [torch.float64]


def test_case_ids_name_the_device_and_cpu_ids_do_not():
    cpu, cuda = get_suite("torch-opinfo"), get_suite("torch-opinfo", "fast", "cuda")
    selection = Selection(
        checks=("grad", "gradgrad", "fwgrad", "fwgrad_bwgrad"), ops=("cholesky",), dtypes=("float64",)
    )
    cpu_items = list(cpu.groups(selection))
    assert cpu_items == [
        GroupInfo("torch-opinfo", "cholesky", "float64", ("grad", "gradgrad", "fwgrad", "fwgrad_bwgrad"))
    ]
    if not torch.cuda.has_magma:
        decided = [str(item.id) for item in cuda.groups(selection)]
        assert decided[0] == "torch-opinfo::cholesky::cuda::float64::grad"
    case = CaseId.parse("torch-opinfo::sinh::cuda::float64::sample0::grad")
    assert (case.op, case.device, case.dtype, case.sample) == ("sinh", "cuda", "float64", 0)
    assert (
        str(CaseId.parse("torch-opinfo::sinh::float64::sample0::grad")) == "torch-opinfo::sinh::float64::sample0::grad"
    )


def test_a_suite_on_cuda_pickles_with_its_device_and_rebuilds_where_its_id_says():
    suite = pickle.loads(pickle.dumps(get_suite("torch-opinfo", "slow", "cuda:1")))
    assert (suite.mode, suite.device, suite.device_type) == ("slow", "cuda:1", "cuda")
    assert suite._build_device(CaseId.parse("torch-opinfo::sinh::cuda::float64::sample0::grad")) == "cuda:1"
    assert (
        get_suite("torch-opinfo")._build_device(CaseId.parse("torch-opinfo::sinh::cuda::float64::sample0::grad"))
        == "cuda"
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_samples_are_made_on_the_gpu_with_device_free_fingerprints():
    suite = get_suite("torch-opinfo", "fast", "cuda")
    (group,) = [g for g in suite.groups(Selection(ops=("sinh",), dtypes=("float64",), checks=("grad",)))]
    listed = suite.list_group(group, Selection())
    built = suite.build(listed[0].id)
    assert built.inputs[0].device.type == "cuda"
    assert built.fingerprint == listed[0].fingerprint
