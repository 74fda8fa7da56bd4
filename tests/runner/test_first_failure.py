"""A test expected to fail stops at its first failing sample, as PyTorch's test does: the same
records on serial and Ray, in any order of arrival, and a resumed run goes on from them."""

from __future__ import annotations

import itertools

import pytest

from distcheck.case.first_failure import Stops
from distcheck.records.case_record import PASS, SKIPPED, XFAIL, XPASS, CaseRecord, RecordBatch
from distcheck.records.listener import Listener
from distcheck.runner import RunOptions, run_suite
from distcheck.runner.collector import Collector
from distcheck.suites.base import RUN, CaseId, CaseInfo, GroupInfo, Selection, group_of
from tests.runner.fake_suite import FakeSuite, UngroupedFakeSuite

NOT_RUN = "not run: its test failed as expected at sample {} (PyTorch's test stops at its first failing sample)"


def _id(sample: int, op: str = "expected", check: str = "grad") -> CaseId:
    return CaseId("fake", op, "float64", check, sample)


def _record(sample: int, verdict: str, op: str = "expected") -> CaseRecord:
    return CaseRecord(_id(sample, op), verdict, f"{verdict} {sample}", 0.1, 1)


def _verdicts(result) -> dict[str, tuple[str, str]]:
    return {record.id: (record.verdict, record.message) for record in result.records}


def _by_id(result) -> dict[str, CaseRecord]:
    return {record.id: record for record in result.records}


def _expected_test(result, samples: int) -> list[str]:
    return [_by_id(result)[_id(k).text].verdict for k in range(samples)]


@pytest.mark.parametrize("suite", [FakeSuite, UngroupedFakeSuite], ids=["grouped", "ungrouped"])
def test_a_test_expected_to_fail_stops_at_its_first_failing_sample(suite):
    fake = suite(ops=("expected", "sin"), samples=6, odd=2)
    result = run_suite(fake, Selection(checks=("grad",)), RunOptions(serial=True))
    assert _expected_test(result, 6) == [XPASS, XPASS, XFAIL, SKIPPED, SKIPPED, SKIPPED]
    later = [_by_id(result)[_id(k).text] for k in (3, 4, 5)]
    assert all(record.message == NOT_RUN.format(2) and record.tasks == 0 for record in later)
    assert all(_by_id(result)[_id(k, "sin").text].verdict == PASS for k in range(6))  # other tests: all run
    assert result.complete and not result.failed  # the test failed, as expected


def test_on_ray_the_records_are_the_serial_ones():
    fake = FakeSuite(ops=("expected", "sin"), samples=6, odd=2)
    selection = Selection(checks=("grad", "gradgrad"))
    serial = run_suite(fake, selection, RunOptions(serial=True))
    on_ray = run_suite(fake, selection, RunOptions(batch_size=1))  # a case per item, over two runners
    assert _verdicts(on_ray) == _verdicts(serial)
    expected = [r.verdict for r in serial.records if r.case.op == "expected"]
    assert expected.count(SKIPPED) == 3  # of grad (gradgrad passes)


def _collected(arrivals: list[list[CaseRecord]], samples: int, recorded=()) -> dict[str, tuple[str, str]]:
    collector = Collector(Listener(), recorded, expected=lambda case: case.op == "expected")
    group = GroupInfo("fake", "expected", "float64", ("grad",))
    assert list(collector.enumerate(iter([group]))) == [group]
    collector.listed(group, [CaseInfo(_id(k), RUN) for k in range(samples)])
    for batch in arrivals:
        collector.emit(RecordBatch(batch))
    result = collector.result()
    assert collector.complete
    return {record.id: (record.verdict, record.message) for record in result}


def test_the_records_do_not_depend_on_their_order_of_arrival():
    records = [_record(0, XPASS), _record(1, XPASS), _record(2, XFAIL), _record(3, XPASS), _record(4, XFAIL)]
    wanted = _collected([records], 5)
    assert [wanted[_id(k).text][0] for k in range(5)] == [XPASS, XPASS, XFAIL, SKIPPED, SKIPPED]
    assert wanted[_id(4).text][1] == NOT_RUN.format(2)
    for order in itertools.permutations(records):
        assert _collected([[record] for record in order], 5) == wanted


def test_a_record_waits_for_its_test_s_earlier_samples():
    seen = []

    class Told(Listener):
        def recorded(self, batch):
            seen.extend(zip(batch.keys, batch.verdicts))

    collector = Collector(Told(), expected=lambda case: case.op == "expected")
    group = GroupInfo("fake", "expected", "float64", ("grad",))
    list(collector.enumerate(iter([group])))
    collector.listed(group, [CaseInfo(_id(k), RUN) for k in range(3)])
    collector.emit(RecordBatch([_record(2, XPASS), _record(1, XPASS)]))
    assert seen == []  # sample 0 may yet fail: then neither was run
    collector.emit(RecordBatch([_record(0, XFAIL)]))
    assert seen == [(_id(0).text, XFAIL), (_id(1).text, SKIPPED), (_id(2).text, SKIPPED)]


@pytest.mark.parametrize("recorded", [2, 3], ids=["not-run-samples-unrecorded", "one-recorded"])
def test_a_resumed_run_runs_no_sample_after_a_recorded_failure(recorded):
    before = [_record(0, XPASS), _record(1, XFAIL), CaseRecord(_id(2), SKIPPED, NOT_RUN.format(1))][:recorded]
    collector = Collector(Listener(), before, expected=lambda c: c.op == "expected")
    cases = [CaseInfo(_id(k), RUN) for k in range(4)]
    assert list(collector.enumerate(iter(cases))) == []
    result = collector.result()
    assert [r.verdict for r in result] == [XPASS, XFAIL, SKIPPED, SKIPPED] and collector.complete


def test_a_runner_skips_only_the_later_samples_of_a_test_that_failed_there():
    stops = Stops()
    stops.note(_id(3), XPASS)
    assert stops.skipped(_id(4)) is None
    stops.note(_id(3), XFAIL)
    assert stops.skipped(_id(1)) is None and stops.skipped(_id(3)) is None  # earlier samples still run
    assert stops.skipped(_id(4)).verdict == SKIPPED
    assert stops.skipped(_id(4, check="gradgrad")) is None  # another test
    assert stops.skipped(_id(4, op="other")) is None


def test_a_record_that_comes_before_its_group_s_listing_waits_for_it():
    # another runner may run a group's cases before the driver hears the runner that listed it
    collector = Collector(Listener(), expected=lambda case: case.op == "expected")
    group, other = GroupInfo("fake", "expected", "float64", ("grad",)), GroupInfo("fake", "sin", "float64", ("grad",))
    list(collector.enumerate(iter([group, other])))
    collector.emit(RecordBatch([_record(1, XPASS), _record(0, PASS, op="sin")]))
    collector.emit(RecordBatch([_record(0, XFAIL)]))
    collector.listed(other, [CaseInfo(_id(0, "sin"), RUN)])
    collector.listed(group, [CaseInfo(_id(k), RUN) for k in range(2)])
    assert [r.verdict for r in collector.result()] == [XFAIL, SKIPPED, PASS] and collector.complete


@pytest.mark.parametrize("device", [None, "cuda"])
@pytest.mark.parametrize("sample", [None, 3])
def test_a_case_s_group_is_read_from_its_id_s_text_as_parsing_it_would(device, sample):
    case = CaseId("torch-opinfo", "nn.functional.conv2d", "complex128", "gradgrad", sample, device)
    parsed = CaseId.parse(case.text)
    assert group_of(case.text) == (case.op, case.dtype) == (parsed.op, parsed.dtype)
