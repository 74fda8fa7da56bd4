"""Suite ``torch-opinfo``: PyTorch's OpInfo database, checked as PyTorch's own gradient tests
check it (``test_ops_gradients.py``, ``test_ops_fwd_gradients.py``), sample by sample.

Cases: every op of ``op_db`` with autograd (backward or forward mode) × float64 / complex128
where the op has backward support for them × the check kinds ``grad`` (test_fn_grad),
``gradgrad`` (test_fn_gradgrad), ``fwgrad`` (test_forward_mode_AD), ``fwgrad_bwgrad``
(test_fn_fwgrad_bwgrad) × the op's samples. A test PyTorch skips or expects to fail is one case
(no sample part) reported ``skipped`` / ``xfail`` with its reason. Mode ``slow`` is the
slow-gradcheck CI job: full Jacobians (unless the op forces fast mode) and
``small_inputs_only`` samples.

On device ``cuda`` (or ``cuda:N``) the samples are made on the GPU and the dtypes, skips and
xfails are those of PyTorch's ``*CUDA`` test classes; the case ids say ``cuda`` after the op
(``torch-opinfo::sinh::cuda::float64::sample0::grad``). A case is rebuilt on the device its id
names: the suite's own device if of that type (``cuda:1``), else the current one of that type.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterator

from distcheck.devices import CPU, device_type, id_device, parse_device
from distcheck.suites.base import (
    CHECK_KINDS,
    ERROR,
    RUN,
    BuiltCase,
    CaseId,
    CaseInfo,
    GroupInfo,
    Selection,
    UsageError,
    enumerate_cases,
)
from distcheck.suites.torch_opinfo import samples
from distcheck.suites.torch_opinfo.calls import (
    FORWARD_AD_UNSUPPORTED,
    SampleFunction,
    check_calls,
    gradcheck_inputs,
    unexpected_grads,
)
from distcheck.suites.torch_opinfo.database import DTYPES, dtype_name, dtype_named, op_named, op_table
from distcheck.suites.torch_opinfo.status import checked_dtypes, expects_not_implemented, has_autograd, pytorch_status


def case_seed(case: CaseId) -> int:
    """The global-RNG seed of a case's checks (their random grad-outputs and batched vectors)."""
    return int.from_bytes(hashlib.sha256(str(case).encode()).digest()[:4], "little")


class TorchOpInfoSuite:
    name = "torch-opinfo"
    engine = "torch"
    devices = ("cpu", "cuda")

    def __init__(self, mode: str = "fast", device: str = CPU):
        self.mode, self.device = mode, parse_device(device)

    def with_device(self, device: str) -> TorchOpInfoSuite:
        return TorchOpInfoSuite(self.mode, device)

    @property
    def device_type(self) -> str:
        return device_type(self.device)

    def _case(self, op: str, dtype: str, check: str, sample: int | None = None) -> CaseId:
        return CaseId(self.name, op, dtype, check, sample, id_device(self.device))

    def _build_device(self, case: CaseId) -> str:
        """Where ``case`` is rebuilt: this suite's device if of the id's type, else that type."""
        wanted = case.device or CPU
        return self.device if self.device_type == wanted else wanted

    @property
    def small_inputs(self) -> bool:
        return self.mode == "slow"

    def prepare(self) -> None:
        op_table()

    def cases(self, selection: Selection) -> Iterator[CaseInfo]:
        return enumerate_cases(self, selection)

    def groups(self, selection: Selection) -> Iterator[GroupInfo | CaseInfo]:
        """Per op with autograd and checked dtype: a group of the check kinds PyTorch runs, then
        the kinds it skips or expects to fail, as cases (from OpInfo metadata only)."""
        unknown = [c for c in selection.checks if c not in CHECK_KINDS]
        if unknown:
            raise UsageError(f"unknown check kind {unknown[0]!r} (choose from {', '.join(CHECK_KINDS)})")
        dtypes = tuple(dtype_named(d) for d in selection.dtypes or DTYPES)
        ops = [op_named(name) for name in selection.ops] if selection.ops else list(op_table().values())
        for op in ops:
            if not has_autograd(op):
                continue
            for dtype in checked_dtypes(op, dtypes, self.device_type):
                runs, decided = [], []
                for check in (kind for kind in CHECK_KINDS if kind in selection.checks):
                    status, reason = self.status(op, check, dtype)
                    case = self._case(op.full_name, dtype_name(dtype), check)
                    if status == RUN:
                        runs.append(check)
                    elif selection.wants(case):
                        decided.append(CaseInfo(case, status, reason))
                if runs:
                    yield GroupInfo(self.name, op.full_name, dtype_name(dtype), tuple(runs))
                yield from decided

    def status(self, op, check: str, dtype) -> tuple[str, str]:
        """Whether the suite runs ``check`` of ``op`` in ``dtype``: ``(status, reason)``."""
        return pytorch_status(op, check, dtype, self.device_type)

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        """The group's cases, check kind by check kind, sample by sample; one ``error`` case
        per check kind if the op's samples cannot be generated."""
        listing = self._listing(op_named(group.op), dtype_named(group.dtype))
        cases = []
        for check in group.checks:
            if isinstance(listing, str):
                case = self._case(group.op, group.dtype, check)
                if selection.wants(case):
                    cases.append(CaseInfo(case, ERROR, listing))
                continue
            for listed in listing:
                case = dataclasses.replace(listed.id, check=check)
                if selection.wants(case):
                    cases.append(dataclasses.replace(listed, id=case))
        return cases

    def _listing(self, op, dtype) -> list[CaseInfo] | str:
        """Per sample, its runnable case (of check kind ``grad``) with its fingerprint and a cost
        hint: in slow mode its input elements (finite differences perturb each); fast-mode cases
        take a few evaluations each."""
        try:
            listed, prints = samples.generated(op, dtype, self.small_inputs, self.device)
        except Exception as e:  # the op's sample function is broken: report it, go on
            return f"generating the samples failed: {type(e).__name__}: {e}"
        cases = []
        for index, (sample, print_) in enumerate(zip(listed, prints)):
            case = self._case(op.full_name, dtype_name(dtype), "grad", index)
            cost = 0 if self.mode == "fast" else sum(x.numel() for x in gradcheck_inputs(sample))
            cases.append(CaseInfo(case, RUN, "", print_, cost))
        return cases

    def build(self, case: CaseId) -> BuiltCase:
        op, dtype = op_named(case.op), dtype_named(case.dtype)
        if case.sample is None:
            raise LookupError(f"{case}: not a runnable case (no sample)")
        sample, print_ = samples.sample(op, dtype, self.small_inputs, case.sample, self._build_device(case))
        inputs = gradcheck_inputs(sample)
        if unexpected_grads(inputs):
            raise AssertionError(
                f"{case}: a sampled input has a gradient before running autograd: a tensor is reused "
                "across SampleInputs (PyTorch's test helper asserts the same)"
            )
        return BuiltCase(
            id=case,
            func=SampleFunction(op, sample),
            inputs=inputs,
            calls=check_calls(op, case.check, self.mode),
            fingerprint=print_,
            expected_error=FORWARD_AD_UNSUPPORTED if expects_not_implemented(op, case.check) else None,
            before_call=functools.partial(samples.seed_everything, case_seed(case)),
        )

    def __repr__(self) -> str:
        device = "" if self.device == CPU else f", device={self.device!r}"
        return f"TorchOpInfoSuite(mode={self.mode!r}{device})"
