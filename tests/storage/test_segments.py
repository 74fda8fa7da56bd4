"""Records written as parts where nothing can be appended, and read back joined."""

from __future__ import annotations

import os
import time

import pytest

from distcheck.storage import location, segments
from distcheck.storage.location import StoreError
from distcheck.storage.segments import SegmentWriter, read_lines


@pytest.fixture
def folder(request):
    import fsspec

    url = f"memory://distcheck-test/{os.getpid()}-{request.node.name}"
    yield url
    if location.is_folder(url):
        fsspec.filesystem("memory").rm(url, recursive=True)


def texts(folder: str) -> list[str]:
    return [line.text for line in read_lines(folder)]


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.01)


def test_a_part_is_written_once_enough_records_wait_and_close_writes_the_rest(folder):
    writer = SegmentWriter(folder, seconds=3600, records=3)
    writer.write("a")
    writer.write("b\nc", records=2)  # a batch of two records in one text
    wait_for(lambda: segments.part_numbers(folder) == [1])
    writer.write("d")
    assert texts(folder) == ["a", "b", "c"]  # d waits: its part is not due
    writer.close()
    assert segments.part_numbers(folder) == [1, 2] and texts(folder) == ["a", "b", "c", "d"]


def test_a_part_is_written_after_the_seconds_even_with_few_records(folder):
    writer = SegmentWriter(folder, seconds=0.05, records=10_000)
    writer.write("a")
    wait_for(lambda: texts(folder) == ["a"])
    writer.close()
    assert segments.part_numbers(folder) == [1]


def test_a_killed_writer_loses_only_what_waited_and_a_resumed_one_numbers_after_the_last(folder):
    killed = SegmentWriter(folder, seconds=3600, records=2)
    killed.write("a\nb", records=2)
    wait_for(lambda: segments.part_numbers(folder) == [1])
    killed.write("c")  # never written: the driver is killed before its part is due
    resumed = SegmentWriter(folder, seconds=3600, records=100)
    resumed.write("c")
    resumed.close()
    assert segments.part_numbers(folder) == [1, 2] and texts(folder) == ["a", "b", "c"]


def test_a_failed_part_is_written_with_the_next_in_order(folder, monkeypatch):
    real, failures = location.write_text, []

    def flaky(target, text):
        if not failures:
            failures.append(target)
            raise StoreError(f"cannot write {target}: the network")
        real(target, text)

    monkeypatch.setattr(location, "write_text", flaky)
    writer = SegmentWriter(folder, seconds=0.01, records=1)
    writer.write("a")
    wait_for(lambda: failures)
    writer.write("b")
    writer.close()
    assert texts(folder) == ["a", "b"] and segments.part_numbers(folder)[0] == 1


def test_records_jsonl_is_read_before_the_parts_and_only_its_last_line_may_be_cut(tmp_path):
    (tmp_path / "records.jsonl").write_text('{"a": 1}\n\n{"b": 2}\n{"c"')
    writer = SegmentWriter(str(tmp_path), seconds=3600)
    writer.write('{"d": 4}')
    writer.close()
    lines = list(read_lines(str(tmp_path)))
    assert [line.text for line in lines] == ['{"a": 1}', '{"b": 2}', '{"c"', '{"d": 4}']
    assert [line.may_be_cut for line in lines] == [False, False, True, False]
    assert lines[-1].where.endswith(os.path.join("records", "part-000001.jsonl"))


def test_the_settings_come_from_the_environment_and_bad_ones_are_one_line(folder, monkeypatch):
    monkeypatch.setenv(segments.SECONDS_VARIABLE, "2.5")
    monkeypatch.setenv(segments.RECORDS_VARIABLE, "50")
    writer = SegmentWriter(folder)
    writer.close()
    assert (writer.seconds, writer.records) == (2.5, 50)
    monkeypatch.setenv(segments.SECONDS_VARIABLE, "soon")
    with pytest.raises(StoreError, match=r"\$DISTCHECK_SEGMENT_SECONDS must be a positive number, not 'soon'"):
        SegmentWriter(folder)
