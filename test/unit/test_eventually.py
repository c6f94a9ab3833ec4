from __future__ import annotations

import pytest

from manager.testing import eventually


async def test_returns_once_the_check_passes() -> None:
    calls = []

    def check() -> int:
        calls.append(1)
        assert len(calls) >= 3
        return len(calls)

    assert await eventually(check, timeout=5, interval=0.01) == 3


async def test_timeout_reports_the_last_failure() -> None:
    async def never() -> None:
        raise AssertionError("phase is Pending")

    with pytest.raises(AssertionError, match=r"job never ran: not true after .*phase is Pending"):
        await eventually(never, timeout=0.1, interval=0.02, message="job never ran")


async def test_falsy_keeps_waiting_but_none_and_values_pass() -> None:
    with pytest.raises(AssertionError, match="returned False"):
        await eventually(lambda: False, timeout=0.05, interval=0.01)
    assert await eventually(lambda: None) is None
    assert await eventually(lambda: [1]) == [1]
    with pytest.raises(AssertionError, match=r"returned \[\]"):
        await eventually(lambda: [], timeout=0.05, interval=0.01)


async def test_retry_on_named_exceptions() -> None:
    calls = []

    def appears() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise LookupError("not yet")
        return "here"

    assert await eventually(appears, timeout=5, interval=0.01, retry_on=(LookupError,)) == "here"
    with pytest.raises(KeyError):
        await eventually(lambda: {}["x"], timeout=0.05, interval=0.01, retry_on=(LookupError,) * 0)
