"""The session's Ray (distcheck.executors.session_ray): started at the first request, once,
whatever the number of requests; its start's error reaches every requester; a folder no
longer served is a clear error, not a wait."""

from __future__ import annotations

import os
import threading

import pytest

from distcheck.executors.session_ray import SessionRay, request_address


def test_started_once_at_the_first_request_and_stopped():
    starts, stops = [], []

    def start() -> str:
        starts.append(threading.current_thread().name)
        return "127.0.0.1:7"

    served = SessionRay(start, lambda: stops.append(1))
    assert not served.started and starts == []  # nothing asked: nothing started
    try:
        answers = []
        askers = [threading.Thread(target=lambda: answers.append(request_address(served.folder))) for _ in range(4)]
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join(timeout=30)
        assert answers == ["127.0.0.1:7"] * 4 and starts == ["distcheck-session-ray"]
    finally:
        served.stop()
    assert stops == [1] and not os.path.exists(served.folder)


def test_an_unused_session_stops_without_starting():
    stops = []
    served = SessionRay(lambda: pytest.fail("started"), lambda: stops.append(1))
    served.stop()
    assert stops == [] and not served.started and not os.path.exists(served.folder)


def test_a_failed_start_is_every_requesters_error():
    def start() -> str:
        raise OSError("no ports left")

    served = SessionRay(start, lambda: None)
    try:
        for _ in range(2):
            with pytest.raises(RuntimeError, match="could not start: OSError: no ports left"):
                request_address(served.folder, timeout=30)
    finally:
        served.stop()


def test_a_folder_not_served_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="not served any more"):
        request_address(str(tmp_path / "gone"))
    with pytest.raises(TimeoutError, match="no answer"):
        request_address(str(tmp_path), timeout=0.2)  # a folder nobody serves
