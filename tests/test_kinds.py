"""The vocabularies as types read and serialize as the strings they replace."""

from __future__ import annotations

import json
import pickle

from distcheck.kinds import FUNCTION, PARTS_IN_TORCH_ORDER, AuxCheck, Mode, Part, VariantKey


def test_str_valued_kinds_serialize_as_their_strings():
    values = [Mode.FORWARD, Part.IMAG, AuxCheck.BATCHED_GRAD, FUNCTION.densified()]
    assert json.loads(json.dumps(values)) == ["forward", "imag", "batched_grad", "f#dense"]
    assert {"forward": 1}[Mode.FORWARD] == 1 and f"{Part.REAL}" == "real"
    assert [pickle.loads(pickle.dumps(v)) for v in values] == values


def test_variant_keys():
    assert VariantKey.of() is FUNCTION and FUNCTION == "f"
    assert VariantKey.of(Part.IMAG) == "imag" and VariantKey.of(Part.REAL, inputs=True) == "inputs-real"
    assert isinstance(VariantKey.of(Part.IMAG).densified(), VariantKey)
    assert PARTS_IN_TORCH_ORDER == ("imag", "real") and Part.REAL.other is Part.IMAG


def test_a_run_s_words_are_today_s_strings():
    from distcheck.kinds import CheckKind, DeathKind, Status, Verdict

    assert [str(k) for k in CheckKind][:4] == ["grad", "gradgrad", "fwgrad", "fwgrad_bwgrad"]
    assert {"pass", "fail", "error", "skipped", "xfail", "timeout", "flaky"} <= {str(v) for v in Verdict}
    assert [str(s) for s in Status] == ["run", "skipped", "xfail", "error"]
    assert DeathKind.NODE_LOST == "node lost" and DeathKind.OUT_OF_MEMORY == "out of memory"
    assert [s.verdict for s in (Status.SKIPPED, Status.XFAIL, Status.ERROR)] == ["skipped", "xfail", "error"]
    assert all(type(s.verdict) is Verdict for s in (Status.SKIPPED, Status.XFAIL, Status.ERROR))
    assert [v for v in Verdict if v.bad] == [Verdict.FAIL, Verdict.ERROR, Verdict.TIMEOUT]


def test_a_record_serializes_and_reads_back_as_the_strings_of_the_last_version():
    from distcheck.kinds import CheckKind, Verdict
    from distcheck.records.case_record import CaseRecord
    from distcheck.suites.base import CaseId

    # a record line as the version before these types wrote it
    line = (
        '{"id":"s::op::float64::sample0::gradgrad","op":"op","check":"gradgrad","dtype":"float64",'
        '"sample":0,"verdict":"fail","message":"m","seconds":0.5,"tasks":1}'
    )
    record = CaseRecord.from_json(json.loads(line))
    assert type(record.verdict) is Verdict and record.verdict is Verdict.FAIL
    assert type(record.case.check) is CheckKind and record.case.check is CheckKind.GRADGRAD
    assert record.json_text == line
    made = CaseRecord(CaseId("s", "op", "float64", CheckKind.GRADGRAD, 0), Verdict.FAIL, "m", 0.5, 1)
    assert made.json_text == line and made == record
    assert pickle.loads(pickle.dumps(record)) == record


def test_a_split_request_never_becomes_a_record():
    import pytest

    from distcheck.case.budget import Estimate
    from distcheck.case.run import Outcome, SplitRequest, to_record
    from distcheck.suites.base import CaseId, CaseInfo

    info = CaseInfo(CaseId("s", "op", "float64", "grad", 0), fingerprint="fp")
    request = SplitRequest("estimated 9 s > 4 s", 0.1, "fp", Estimate(1, 1, 1, 9.0))
    assert not hasattr(request, "verdict")
    with pytest.raises(TypeError, match="SplitRequest"):
        to_record(info, request, 1)
    assert to_record(info, Outcome("pass", "", 0.1, "fp"), 1).verdict == "pass"
