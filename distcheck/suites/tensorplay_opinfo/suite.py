"""Suite ``tensorplay-opinfo``: the samples of PyTorch's OpInfo database, checked on the
tensorplay function of the same name, with the options PyTorch's own gradient tests use.

Cases are torch-opinfo's, by the same ids under this suite's name
(``tensorplay-opinfo::nn.functional.conv2d::float64::sample3::grad``): the same ops, dtypes,
samples (torch-opinfo's deterministic generation, converted to tensorplay through numpy) and
gradcheck / gradgradcheck options per check kind and mode. What differs:

- tests that cannot run on tensorplay are one ``skipped`` case per (op, dtype, check kind),
  with the reason (:mod:`~distcheck.suites.tensorplay_opinfo.status`): PyTorch's own skips and
  expected failures first, then forward-mode checks, ops tensorplay lacks and ops that crash
  the process;
- a sample whose values do not convert, or whose ``output_process_fn_grad`` uses something
  tensorplay lacks, is ``skipped`` (with the reason) for each check kind;
- fingerprints are those of the converted tensorplay values;
- before each call the global RNGs of torch, ``random``, numpy and tensorplay are seeded from
  the case id (gradgradcheck's random grad-outputs and the batched checks' vectors are drawn
  from tensorplay's).
"""

from __future__ import annotations

import functools

import tensorplay as tp

from distcheck.suites.base import GRADCHECK_KINDS, RUN, SKIPPED, BuiltCase, CaseId, CaseInfo
from distcheck.suites.tensorplay_opinfo.calls import TensorplaySampleFunction, convert
from distcheck.suites.tensorplay_opinfo.convert import Unconvertible
from distcheck.suites.tensorplay_opinfo.fingerprint import fingerprint
from distcheck.suites.tensorplay_opinfo.lookup import output_processor
from distcheck.suites.tensorplay_opinfo.status import tensorplay_status
from distcheck.suites.tensorplay_opinfo.translate import Untranslatable
from distcheck.suites.torch_opinfo import samples
from distcheck.suites.torch_opinfo.calls import check_calls
from distcheck.suites.torch_opinfo.database import OP_DB, dtype_name, dtype_named, op_named
from distcheck.suites.torch_opinfo.suite import TorchOpInfoSuite, case_seed


def seed_everything(seed: int) -> None:
    """Seed torch's, ``random``'s, numpy's and tensorplay's global RNGs."""
    samples.seed_everything(seed)
    tp.manual_seed(seed)


class TensorplayOpInfoSuite(TorchOpInfoSuite):
    """The OpInfo samples, converted, against tensorplay's functions: the torch-opinfo suite
    with tensorplay's statuses, conversions and functions."""

    name = "tensorplay-opinfo"
    engine = "tensorplay"
    check_kinds = GRADCHECK_KINDS  # the function's checks: tensorplay's ops are not OpInfos' variants
    databases = (OP_DB,)
    runs_xfail = False  # PyTorch's expected failures are its own: reported, not run on tensorplay

    def status(self, op, check: str, dtype) -> tuple[str, str]:
        return tensorplay_status(op, check, dtype)

    def _listing(self, op, dtype, plain: bool = False) -> list[CaseInfo] | str:
        """Per sample, its case (of check kind ``grad``): runnable, with the fingerprint of its
        converted values and a cost hint (slow mode: its input elements, which finite differences
        perturb one by one; fast-mode cases take a few evaluations each), or skipped if it does not
        convert."""
        try:
            listed, _ = samples.generated(op, dtype, self.small_inputs)
        except Exception as e:  # the op's sample function is broken: report it, go on
            return f"generating the samples failed: {type(e).__name__}: {e}"
        cases = []
        for index, sample in enumerate(listed):
            case = CaseId(self.name, op.full_name, dtype_name(dtype), "grad", index)
            try:
                output_processor(sample)
                converted = convert(sample)
            except (Unconvertible, Untranslatable) as e:
                cases.append(CaseInfo(case, SKIPPED, f"sample {index} does not convert to tensorplay: {e}"))
                continue
            cost = 0 if self.mode == "fast" else sum(x.numel() for x in converted.inputs)
            cases.append(CaseInfo(case, RUN, "", fingerprint(converted.values), cost))
        return cases

    def build(self, case: CaseId) -> BuiltCase:
        op, dtype = op_named(case.op), dtype_named(case.dtype)
        status, reason = tensorplay_status(op, case.check, dtype)
        if case.sample is None or status != RUN:
            raise LookupError(f"{case}: not a runnable case ({reason or 'no sample'})")
        sample, _ = samples.sample(op, dtype, self.small_inputs, case.sample)
        converted = convert(sample)
        rebuild = (_rebuilt_function, (self.mode, str(case)))
        return BuiltCase(
            id=case,
            func=TensorplaySampleFunction(op, sample, converted, rebuild),
            inputs=converted.inputs,
            calls=check_calls(op, case.check, self.mode),
            fingerprint=fingerprint(converted.values),
            before_call=functools.partial(seed_everything, case_seed(case)),
        )

    def __repr__(self) -> str:
        return f"TensorplayOpInfoSuite(mode={self.mode!r})"


def _rebuilt_function(mode: str, case: str) -> TensorplaySampleFunction:
    """A case's checked function, rebuilt from its id (how it travels to another process)."""
    return TensorplayOpInfoSuite(mode).build(CaseId.parse(case)).func
