"""Suite ``torch-opinfo``: PyTorch's OpInfo database, checked as PyTorch's own gradient tests
check it (``test_ops_gradients.py``, ``test_ops_fwd_gradients.py``), sample by sample.

Cases: every op with autograd (backward or forward mode) × float64 / complex128 where the op
has backward support for them × the check kinds ``grad`` (test_fn_grad), ``gradgrad``
(test_fn_gradgrad), ``fwgrad`` (test_forward_mode_AD), ``fwgrad_bwgrad``
(test_fn_fwgrad_bwgrad), ``inplace_grad`` (test_inplace_grad), ``inplace_gradgrad``
(test_inplace_gradgrad), ``inplace_fwgrad`` (test_inplace_forward_mode_AD) and
``fail_gradgrad`` (test_fn_fail_gradgrad), each over the op lists its test runs over
(``op_db``, ``hop_db``, ``custom_op_db``: see :data:`.pytorch_names.TESTS`) × the op's samples
(but those that broadcast their input, in the in-place kinds). A test that asserts a raise
around its whole loop over the samples (fail_gradgrad; fwgrad, inplace_fwgrad and fwgrad_bwgrad
of an op without forward AD) is one case, its sample 0, that checks the samples in turn until
one raises, as PyTorch's test stops there. A test PyTorch skips or expects
to fail is one case (no sample part) reported ``skipped`` / ``xfail`` with its reason. Mode
``slow`` is the slow-gradcheck CI job: full Jacobians (unless the op forces fast mode) and
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
    XFAIL,
    BuiltCase,
    CaseId,
    CaseInfo,
    CheckCall,
    GroupInfo,
    Selection,
    UsageError,
    enumerate_cases,
)
from distcheck.suites.checkers import torch_checker
from distcheck.suites.torch_opinfo import samples
from distcheck.suites.torch_opinfo.calls import (
    InplaceBackward,
    SampleFunction,
    SamplesUntilRaise,
    assert_grad_free,
    check_calls,
    gradcheck_inputs,
)
from distcheck.suites.torch_opinfo.database import (
    DTYPES,
    database_of,
    dtype_name,
    dtype_named,
    op_named,
    op_table,
)
from distcheck.suites.torch_opinfo.pytorch_names import CUSTOM_OP_DB, HOP_DB, OP_DB
from distcheck.suites.torch_opinfo.status import (
    INPLACE_CHECKS,
    checked_dtypes,
    expected_error,
    has_autograd,
    has_test,
    pytorch_status,
    until_raise,
)


def case_seed(case: CaseId) -> int:
    """The global-RNG seed of a case's checks (their random grad-outputs and batched vectors)."""
    return int.from_bytes(hashlib.sha256(str(case).encode()).digest()[:4], "little")


class TorchOpInfoSuite:
    name = "torch-opinfo"
    engine = "torch"
    devices = ("cpu", "cuda")
    check_kinds: tuple[str, ...] = CHECK_KINDS  # the kinds it enumerates (of those selected)
    databases: tuple[str, ...] = (OP_DB, HOP_DB, CUSTOM_OP_DB)  # the op lists it enumerates
    runs_xfail = True  # a test expected to fail is run (xfail / xpass), not decided unrun

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
            if not has_autograd(op) or database_of(op) not in self.databases:
                continue
            kinds = [kind for kind in self.check_kinds if kind in selection.checks and has_test(op, kind)]
            for dtype in checked_dtypes(op, dtypes, self.device_type) if kinds else ():
                runs, decided = [], []
                for check in kinds:
                    status, reason = self.status(op, check, dtype)
                    case = self._case(op.full_name, dtype_name(dtype), check)
                    if status == RUN or (status == XFAIL and self.runs_xfail):
                        runs.append(check)
                    elif selection.wants(case):
                        decided.append(CaseInfo(case, status, reason))
                if runs:
                    yield GroupInfo(self.name, op.full_name, dtype_name(dtype), tuple(runs))
                yield from decided

    def expected_to_fail(self, case: CaseId) -> bool:
        """Whether ``case`` is a sample of a test this suite runs though it is expected to fail
        (its samples stop at the first failing one, as PyTorch's test does)."""
        return self.runs_xfail and self.status(op_named(case.op), case.check, dtype_named(case.dtype))[0] == XFAIL

    def status(self, op, check: str, dtype) -> tuple[str, str]:
        """Whether the suite runs ``check`` of ``op`` in ``dtype``: ``(status, reason)``."""
        return pytorch_status(op, check, dtype, self.device_type)

    def list_group(self, group: GroupInfo, selection: Selection) -> list[CaseInfo]:
        """The group's cases, check kind by check kind, sample by sample (the in-place kinds
        leave out samples that broadcast their input), but one case, sample 0, for a test that
        asserts a raise around its whole loop (fail_gradgrad; the forward-mode kinds of an op
        without forward AD: see :func:`.status.until_raise`); one ``error`` case per check kind
        if the op's samples cannot be generated."""
        op, dtype = op_named(group.op), dtype_named(group.dtype)
        cases = []
        for check in group.checks:
            plain = _plain_samples(op, check)
            listing = self._listing(op, dtype, plain)
            if isinstance(listing, str):
                case = self._case(group.op, group.dtype, check)
                if selection.wants(case):
                    cases.append(CaseInfo(case, ERROR, listing))
                continue
            if until_raise(op, check):  # one case: its sample 0 stands for the test's loop
                listing = listing[:1]
            elif check in INPLACE_CHECKS:
                generated = samples.generated(op, dtype, self.small_inputs, self.device, plain)[0]
                listing = [listed for listed, s in zip(listing, generated) if not s.broadcasts_input]
            for listed in listing:
                case = dataclasses.replace(listed.id, check=check)
                if selection.wants(case):
                    cases.append(dataclasses.replace(listed, id=case))
        return cases

    def _listing(self, op, dtype, plain: bool = False) -> list[CaseInfo] | str:
        """Per sample, its runnable case (of check kind ``grad``) with its fingerprint and a cost
        hint: in slow mode its input elements (finite differences perturb each); fast-mode cases
        take a few evaluations each. ``plain``: of the plain sample list (see :mod:`.samples`)."""
        try:
            listed, prints = samples.generated(op, dtype, self.small_inputs, self.device, plain)
        except Exception as e:  # the op's sample function is broken: report it, go on
            return f"generating the samples failed: {type(e).__name__}: {e}"
        cases = []
        for index, (sample, print_) in enumerate(zip(listed, prints)):
            case = self._case(op.full_name, dtype_name(dtype), "grad", index)
            cost = 0 if self.mode == "fast" or plain else sum(x.numel() for x in gradcheck_inputs(sample))
            cases.append(CaseInfo(case, RUN, "", print_, cost))
        return cases

    def build(self, case: CaseId) -> BuiltCase:
        op, dtype = op_named(case.op), dtype_named(case.dtype)
        if case.sample is None:
            raise LookupError(f"{case}: not a runnable case (no sample)")
        status, reason = self.status(op, case.check, dtype)
        plain, inplace = _plain_samples(op, case.check), case.check in INPLACE_CHECKS
        looped = until_raise(op, case.check)
        if looped and case.sample != 0:
            raise LookupError(
                f"{case}: {case.check} expects a raise from its test's whole loop over the samples, so it is "
                "one case, its sample 0 (it checks every sample in turn until one raises)"
            )
        device = self._build_device(case)
        sample, print_ = samples.sample(op, dtype, self.small_inputs, case.sample, device, plain)
        if inplace and sample.broadcasts_input and not looped:
            raise LookupError(f"{case}: the sample broadcasts its input, which in-place checks leave out")
        inputs = gradcheck_inputs(sample)
        assert_grad_free(inputs, str(case))
        if looped:
            listed = samples.generated(op, dtype, self.small_inputs, device)[0]
            seed = functools.partial(_seed_sample, case)
            return BuiltCase(
                id=case,
                func=SamplesUntilRaise(op, listed, case.check, self.mode, seed, inplace),
                inputs=inputs,
                calls=(CheckCall("call", {}),),
                fingerprint=print_,
                expected_error=expected_error(op, case.check),
                expected_failure=reason if status == XFAIL else None,
            )
        return BuiltCase(
            id=case,
            func=InplaceBackward(op, sample) if plain else SampleFunction(op, sample, inplace),
            inputs=inputs,
            calls=check_calls(op, case.check, self.mode),
            fingerprint=print_,
            expected_error=expected_error(op, case.check),
            expected_failure=reason if status == XFAIL else None,
            reference=torch_checker,
            before_call=functools.partial(samples.seed_everything, case_seed(case)),
        )

    def __repr__(self) -> str:
        device = "" if self.device == CPU else f", device={self.device!r}"
        return f"TorchOpInfoSuite(mode={self.mode!r}{device})"


def _seed_sample(case: CaseId, index: int) -> None:
    samples.seed_everything(case_seed(dataclasses.replace(case, sample=index)))


def _plain_samples(op, check: str) -> bool:
    """Whether ``check``'s test iterates the op's plain sample list (test_inplace_grad of an op
    that claims no in-place autograd calls ``sample_inputs`` itself, with its defaults)."""
    return check == "inplace_grad" and not op.supports_inplace_autograd
