"""How cases and records travel: case lists unpickled only where read; records in one shape, a
batch of columns, from where they are made to the run's end (a single record is a batch of one),
giving back exactly the records that were made."""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections import Counter

import pytest

from distcheck.case.budget import Estimate
from distcheck.case.run import Outcome, to_record
from distcheck.records import case_record as records_module
from distcheck.records.case_record import BAD, CaseRecord, RecordBatch
from distcheck.records.listener import Listener
from distcheck.records.record_list import RecordList
from distcheck.records.result import RunResult
from distcheck.reports import json_report
from distcheck.runner.collector import Collector
from distcheck.storage.run_folder import RECORDS, RunWriter
from distcheck.suites import base
from distcheck.suites.base import RUN, SKIPPED, CaseId, CaseInfo, GroupInfo
from distcheck.suites.case_list import CaseList


def _info(op: str, sample: int, status: str = RUN) -> CaseInfo:
    return CaseInfo(CaseId("fake", op, "float64", "grad", sample), status, "", f"fp{sample}" if status == RUN else None)


def _outcomes(verdicts=("pass", "fail", "pass", "error")) -> list[Outcome]:
    """Outcomes as a runner's cases give them, with an estimate, a message and a blob of text."""
    made = []
    for k, verdict in enumerate(verdicts):
        estimate = Estimate(columns=10 * k, rows=4, itemsize=8, seconds=0.5 * k) if k % 2 else None
        made.append(
            Outcome(verdict, "" if verdict == "pass" else f'bad "{k}"\nline two', 0.25 * (k + 1), None, estimate)
        )
    return made


def _records(op: str = "sin", verdicts=("pass", "fail", "pass", "error")) -> list[CaseRecord]:
    """Records as a runner makes them (to_record)."""
    return [to_record(_info(op, k), outcome, 1) for k, outcome in enumerate(_outcomes(verdicts))]


def _batch(records: list[CaseRecord]) -> RecordBatch:
    """The batch as the driver gets it: made, pickled, unpickled."""
    return pickle.loads(pickle.dumps(RecordBatch(records)))


_loaded = Counter()
_load_case_info = base._load_case_info


def _counted_load(*args):
    """base._load_case_info, counted (module-level: pickled by name while it stands in)."""
    _loaded["info"] += 1
    return _load_case_info(*args)


def test_a_case_list_is_unpickled_only_where_its_cases_are_read(monkeypatch):
    monkeypatch.setattr(base, "_load_case_info", _counted_load)
    _loaded.clear()
    infos = [_info("sin", 0), _info("sin", 1, SKIPPED), _info("sin", 2)]
    listing = CaseList(infos)
    travelled = pickle.loads(pickle.dumps(listing))
    assert _loaded["info"] == 1  # the decided case only: keys and a blob, not the cases
    assert travelled.keys == tuple(info.key for info in infos) and len(travelled) == 3
    assert travelled.decided == (infos[1],)
    again = pickle.loads(pickle.dumps(travelled))  # passed on as it came: the same blob
    assert _loaded["info"] == 2
    assert travelled[2] == infos[2] and _loaded["info"] == 5  # read: unpickled, once
    assert list(travelled) == infos and travelled == infos and _loaded["info"] == 5
    share = again.take([2, 0])
    assert share.keys == (infos[2].key, infos[0].key) and share.decided == ()
    assert list(share) == [infos[2], infos[0]] and share[1:] == (infos[0],)
    assert CaseList.of(share) is share and CaseList.of(infos) == infos


def test_a_record_batch_gives_back_exactly_the_records_the_runner_made():
    records = _records()
    batch = _batch(records)
    assert len(batch) == 4 and batch.bad == (1, 3)
    assert batch.tally == {("grad", "pass"): 2, ("grad", "fail"): 1, ("grad", "error"): 1}
    made = batch.records()
    assert made == records
    assert [r.json_text for r in made] == [r.json_text for r in records]
    assert [r.estimate for r in made] == [r.estimate for r in records]
    assert [r.to_json() for r in made] == [json.loads(r.json_text) for r in records]
    rest, out = batch.without([3, 1])
    assert out == [records[1], records[3]] and rest.records() == [records[0], records[2]]
    assert rest.bad == () and rest.tally == {("grad", "pass"): 2}
    empty = RecordBatch()
    assert not empty and empty.records() == [] and empty.estimates is None


def test_any_record_travels_as_a_batch_of_one_and_comes_back_equal_field_for_field():
    """Records the driver makes (a split case's chunks, kept blocks, reruns' attempts, decided
    cases) travel in the same shape as a runner's."""
    case = CaseId("fake", "tan", "float64", "grad", 0)
    attempts = ({"verdict": "fail", "seconds": 0.5, "message": "m"}, {"verdict": "pass", "seconds": 0.4, "message": ""})
    made = [
        CaseRecord(case, "flaky", "passed on rerun 1", 0.5, 1, {"seconds": 1.0}, None, attempts),
        CaseRecord(dataclasses.replace(case, sample=1), "fail", "bad", 2.5, 12, None, "tan-1.npz"),
        CaseRecord(dataclasses.replace(case, sample=None, check="gradgrad"), "skipped", "no"),
    ]
    for record in made:
        (back,) = _batch([record]).records()
        assert back == record and back.json_text == record.json_text
        assert (back.tasks, back.estimate, back.blocks, back.attempts) == (
            record.tasks,
            record.estimate,
            record.blocks,
            record.attempts,
        )
    batch = _batch(made)
    assert batch.records() == made and batch.bad == (1,) and batch.blocks == [None, "tan-1.npz", None]
    assert RecordBatch(made).record(1) is made[1]  # a batch made here hands back its own records


def test_a_record_list_reads_its_batches_by_column_and_makes_records_only_when_asked(monkeypatch):
    sin, cos = _records("sin"), _records("cos", ("pass", "timeout"))
    single = CaseRecord(CaseId("fake", "tan", "float64", "grad", 0), "pass", "", 0.5, 1)
    unrun = CaseRecord(CaseId("fake", "tan", "float64", "gradgrad"), "skipped", "no", 0.0, 0)
    batch_sin, batch_cos = _batch(sin), _batch(cos)
    entries = [(batch_sin, 0), (batch_sin, 1), (RecordBatch([single]), 0), (batch_cos, 1)]
    entries += [(RecordBatch([unrun]), 0), (batch_sin, 2), (batch_sin, 3)]
    expected = [sin[0], sin[1], single, cos[1], unrun, sin[2], sin[3]]
    made = Counter()
    original = records_module._record
    monkeypatch.setattr(
        records_module, "_record", lambda case, *rest: made.update([case.text]) or original(case, *rest)
    )
    records = RecordList(entries)
    assert len(records) == 7
    assert records.tally() == Counter((r.case.check, r.verdict) for r in expected)
    assert records.bodies() == [r.json_text[1:] for r in expected]
    assert records.verdicts() == [r.verdict for r in expected]
    assert not made  # nothing made for any of that
    # as the summary had them: the slowest of the cases that ran (ties in run order), the bad ones
    ran = [r for r in expected if r.tasks > 0]
    assert records.slowest(3) == sorted(ran, key=lambda r: r.seconds, reverse=True)[:3]
    assert records.having(BAD) == [r for r in expected if r.verdict in BAD]
    assert records == expected and records[2] is single and records[-1] == sin[3] and records[1:3] == expected[1:3]
    assert made == Counter(r.id for r in expected if r not in (single, unrun))  # each made once, however often read
    wrapped = RecordList.of(expected)
    assert RecordList.of(wrapped) is wrapped and wrapped.tally() == records.tally()
    assert wrapped.slowest(3) == records.slowest(3) and wrapped.bodies() == records.bodies()


def test_the_json_report_and_the_run_folder_are_the_same_from_a_runner_s_batches_as_from_single_records(tmp_path):
    records = _records() + _records("cos", ("pass",))
    batches = [_batch(records[:4]), _batch(records[4:])]
    singles = [RecordBatch([record]) for record in records]  # as a serial run tells them
    from_batches = RunResult(
        "fake", "fast", "ray", 2, 1.0, RecordList([(b, j) for b in batches for j in range(len(b))])
    )
    from_records = RunResult("fake", "fast", "ray", 2, 1.0, records)
    assert json_report.text(from_batches) == json_report.text(from_records)
    assert json.loads(json_report.text(from_batches))["cases"] == [r.to_json() for r in records]
    for name, told in (("batches", batches), ("singles", singles)):
        writer = RunWriter(tmp_path / name, {"$report_type": "RunStart"})
        for batch in told:
            writer.recorded(batch)
        writer.close()
    assert (tmp_path / "batches" / RECORDS).read_bytes() == (tmp_path / "singles" / RECORDS).read_bytes()
    lines = (tmp_path / "singles" / RECORDS).read_text().splitlines()
    assert [json.loads(line) for line in lines[1:]] == [{"$report_type": "CaseRecord", **r.to_json()} for r in records]


def test_a_resumed_run_folder_gets_no_second_line_for_a_recorded_case(tmp_path):
    records = _records()
    writer = RunWriter(tmp_path, None, {records[0].id, records[2].id})
    writer.recorded(RecordBatch(records[:3]))
    writer.recorded(_batch(records[3:]))
    writer.close()
    lines = [json.loads(line) for line in (tmp_path / RECORDS).read_text().splitlines()]
    assert [line["id"] for line in lines[1:]] == [records[1].id, records[3].id]


class _Told(Listener):
    def __init__(self):
        self.told: list[str] = []

    def recorded(self, batch: RecordBatch) -> None:
        self.told += [record.id for record in batch.records()]


def _collector(hold: bool = False, listener: Listener | None = None) -> Collector:
    collector = Collector(listener or Listener(), hold=hold)
    skipped = CaseInfo(CaseId("fake", "x", "float64", "grad"), SKIPPED, "not today")
    groups = [GroupInfo("fake", "sin", "float64", ("grad",)), skipped, GroupInfo("fake", "cos", "float64", ("grad",))]
    assert list(collector.enumerate(iter(groups))) == [groups[0], groups[2]]
    return collector


def test_the_collector_keeps_batches_whole_and_orders_their_records_at_the_end():
    sin, cos = _records("sin"), _records("cos", ("pass", "pass"))
    told = _Told()
    collector = _collector(listener=told)
    collector.listed(GroupInfo("fake", "cos", "float64", ("grad",)), CaseList(_info("cos", k) for k in range(2)))
    collector.emit(_batch(cos[1:]))
    collector.listed(GroupInfo("fake", "sin", "float64", ("grad",)), CaseList(_info("sin", k) for k in range(4)))
    collector.emit(_batch([sin[2], sin[0]]))
    collector.emit(RecordBatch([sin[1]]))
    collector.emit(_batch([sin[3], cos[0]]))
    assert len(told.told) == 7  # the skipped case, then every record, made for the listener that reads them
    result = collector.result()
    assert collector.complete
    assert [r.id for r in result] == [*(r.id for r in sin), "fake::x::float64::grad", *(r.id for r in cos)]
    assert result == [*sin, result[4], *cos] and result[4].verdict == "skipped"
    assert result.tally() == Counter((r.case.check, r.verdict) for r in result)


def test_a_case_recorded_twice_keeps_its_last_record_and_an_unknown_case_comes_last():
    sin = _records("sin", ("fail", "pass"))
    collector = _collector()
    collector.listed(GroupInfo("fake", "sin", "float64", ("grad",)), CaseList(_info("sin", k) for k in range(2)))
    collector.emit(_batch(sin))
    again = CaseRecord(sin[0].case, "pass", "", 0.1, 1)
    stray = CaseRecord(CaseId("fake", "tan", "float64", "grad", 0), "pass", "", 0.1, 1)
    collector.emit(RecordBatch([again, stray]))
    result = collector.result()
    assert list(result) == [again, sin[1], result[2], stray] and result[2].verdict == "skipped"
    assert result.tally() == Counter({("grad", "pass"): 3, ("grad", "skipped"): 1})  # not the batch's fail
    assert not collector.complete  # cos was never listed


def test_bad_records_of_a_batch_are_held_for_reruns_with_their_listed_case():
    sin = _records("sin", ("pass", "fail", "pass"))
    collector = _collector(hold=True)
    listing = CaseList(_info("sin", k) for k in range(3))
    collector.listed(GroupInfo("fake", "sin", "float64", ("grad",)), pickle.loads(pickle.dumps(listing)))
    collector.emit(_batch(sin))
    assert list(collector.held) == [sin[1].id]
    info, record = collector.held[sin[1].id]
    assert info == _info("sin", 1) and record == sin[1]
    assert [r.id for r in collector.result()] == [sin[0].id, sin[2].id, "fake::x::float64::grad"]
    assert not collector.complete  # a case held, and cos never listed


@pytest.mark.parametrize("quiet", [True, False])
def test_a_listener_that_reads_no_record_gets_none_made(monkeypatch, quiet):
    made = Counter()
    monkeypatch.setattr(RecordBatch, "records", lambda self: made.update(["batch"]) or [])
    listener = Listener() if quiet else _Told()
    listener.recorded(_batch(_records()))
    assert made["batch"] == (0 if quiet else 1)
