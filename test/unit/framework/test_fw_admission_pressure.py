"""Admission pressure (``manager.webhook.pressure``, framework.md D.14): when admission counts as
under load, how long a reconcile waits for it, and the word shared with another process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from manager.webhook.pressure import AdmissionPressure


def test_under_load_only_at_the_threshold_within_the_window() -> None:
    pressure = AdmissionPressure(window=30.0, threshold=3)
    pressure.note()
    pressure.note()
    assert not pressure.under_load(), "two requests are a trickle, not a load"
    pressure.note()
    assert pressure.under_load()


def test_arrivals_of_an_earlier_window_do_not_count() -> None:
    pressure = AdmissionPressure(window=0.05, threshold=3)
    pressure.note()
    pressure.note()
    time.sleep(0.06)
    pressure.note()
    assert not pressure.under_load(), "the window restarted: one arrival in it"


def test_the_load_passes_one_window_after_the_last_request() -> None:
    # a window long enough that no stall of a busy machine ends it before the first look
    pressure = AdmissionPressure(window=1.0, threshold=1)
    noted = time.monotonic()
    pressure.note()
    assert pressure.under_load()
    time.sleep(max(0.0, 1.05 - (time.monotonic() - noted)))
    assert not pressure.under_load()


async def test_wait_returns_at_once_without_load() -> None:
    pressure = AdmissionPressure(window=0.05, threshold=2)
    pressure.note()
    assert await pressure.wait() == 0.0


async def test_wait_lasts_until_the_load_has_passed() -> None:
    pressure = AdmissionPressure(window=0.2, threshold=1, max_wait=30.0)
    noted = time.monotonic()
    pressure.note()
    await pressure.wait()
    assert not pressure.under_load()
    assert time.monotonic() - noted >= 0.2, "returned before the load's window ended"


async def test_a_load_that_goes_on_delays_a_reconcile_by_max_wait_at_most() -> None:
    pressure = AdmissionPressure(window=30.0, threshold=1, max_wait=0.2)
    pressure.note()
    waited = await asyncio.wait_for(pressure.wait(), timeout=10)
    assert pressure.under_load(), "the load goes on"
    assert waited >= 0.2


async def test_max_wait_zero_never_waits() -> None:
    pressure = AdmissionPressure(window=30.0, threshold=1, max_wait=0)
    pressure.note()
    assert await pressure.wait() == 0.0


CHILD_NOTES = """
import sys, time
from manager.webhook.pressure import AdmissionPressure
pressure = AdmissionPressure(int(sys.argv[1]), window=30.0, threshold=5)
for _ in range(5):
    pressure.note()
"""


def test_a_shared_word_carries_another_process_s_load() -> None:
    pressure = AdmissionPressure.shared(max_wait=30.0)
    try:
        assert not pressure.under_load()
        fd = pressure.fileno()
        done = subprocess.run(
            [sys.executable, "-c", CHILD_NOTES, str(fd)], pass_fds=[fd], timeout=60, check=False
        )
        assert done.returncode == 0
        assert pressure.under_load(), "the other process's five requests within its window"
    finally:
        pressure.close()


def test_a_private_word_has_no_file_descriptor() -> None:
    with pytest.raises(ValueError, match="no file descriptor"):
        AdmissionPressure().fileno()
