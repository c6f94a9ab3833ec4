"""``manager.longrun``: whatever stops a long command, its last line says why and where.

Each test runs ``longrun.command`` for real (signal handlers, event loop, cancellation), with a
body that fails or that signals its own process, and reads what it printed (``capfd``: the
signal handler writes with ``os.write``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator

import pytest
import uvloop

from manager import longrun, loops
from manager.longrun import Progress


def last_line(err: str) -> str:
    return err.strip().splitlines()[-1]


def test_an_expected_error_is_one_line_naming_scenario_and_step(capfd: pytest.CaptureFixture[str]) -> None:
    progress = Progress("cmd")

    def body() -> int:
        with progress.scenario("first"):
            pass
        with progress.scenario("second"), progress.step("connect"):
            raise ConnectionRefusedError(111, "Connection refused")

    assert longrun.command(progress, body) == 2
    err = capfd.readouterr().err
    assert last_line(err) == (
        "cmd: error after 1 scenarios, during second/connect: ConnectionRefusedError: [Errno 111] "
        "Connection refused"
    )
    assert "Traceback" not in err


def test_a_bug_gets_its_traceback_above_the_line(capfd: pytest.CaptureFixture[str]) -> None:
    progress = Progress("cmd")

    def body() -> int:
        with progress.step("parse"):
            return {}["missing"]  # type: ignore[no-any-return]

    assert longrun.command(progress, body) == 2
    err = capfd.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert last_line(err) == "cmd: error after 0 scenarios, during parse: KeyError: 'missing'"


def test_the_failing_step_is_named_not_the_cleanup_after_it(capfd: pytest.CaptureFixture[str]) -> None:
    progress = Progress("cmd")

    async def main() -> int:
        async def side(name: str, fail: bool) -> None:
            with progress.step(f"settle ({name})"):
                await asyncio.sleep(0.01 if fail else 10)
                if fail:
                    raise TimeoutError("no answer")

        try:
            with progress.scenario("s"):
                await asyncio.gather(side("ours", False), side("theirs", True))
        finally:
            with progress.step("stopping"):
                await asyncio.sleep(0)
        return 0

    assert longrun.run(progress, main) == 2
    assert last_line(capfd.readouterr().err) == (
        "cmd: error after 0 scenarios, during s/settle (theirs): TimeoutError: no answer"
    )


def test_several_errors_are_all_named(capfd: pytest.CaptureFixture[str]) -> None:
    progress = Progress("cmd", unit=None)

    def body() -> int:
        raise ExceptionGroup("both", [RuntimeError("ours failed"), OSError("theirs failed")])

    assert longrun.command(progress, body) == 2
    assert last_line(capfd.readouterr().err) == (
        "cmd: error during start-up: 2 errors: RuntimeError: ours failed; OSError: theirs failed"
    )


@pytest.fixture
def default_dispositions() -> Iterator[None]:
    """Every signal of ``longrun.SIGNALS`` at its default action for the test, whatever the test
    process inherited (under ``nohup`` SIGHUP arrives ignored, and an ignored signal is left
    ignored by design: see ``test_a_signal_ignored_at_start_stays_ignored``)."""
    before = {sig: signal.getsignal(sig) for sig in longrun.SIGNALS}
    for sig in longrun.SIGNALS:
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_cancels_the_run_its_cleanup_runs_and_it_says_where(
    capfd: pytest.CaptureFixture[str], sig: signal.Signals, default_dispositions: None
) -> None:
    progress = Progress("cmd")
    cleaned: list[str] = []
    before = signal.getsignal(sig)

    async def main() -> int:
        try:
            with progress.scenario("a"):
                pass
            with progress.scenario("b"), progress.step("waiting"):
                os.kill(os.getpid(), sig)
                await asyncio.sleep(30)
        finally:
            cleaned.append("stopped")
        return 0

    assert longrun.run(progress, main, on_stop=lambda: print("results so far")) == 128 + sig
    out, err = capfd.readouterr()
    assert cleaned == ["stopped"]
    assert "results so far" in out
    assert f"cmd: {sig.name} received: stopping and cleaning up" in err
    assert last_line(err) == f"cmd: interrupted by {sig.name} after 1 scenarios, during b/waiting"
    assert signal.getsignal(sig) == before  # the handler is put back


def test_a_signal_ignored_at_start_stays_ignored(
    capfd: pytest.CaptureFixture[str], default_dispositions: None
) -> None:
    """``nohup make conformance``: SIGHUP was ignored when the run started, so a hang-up does
    not stop it (the run ends as its body does, the disposition is still "ignore")."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    progress = Progress("cmd")

    async def main() -> int:
        with progress.scenario("a"), progress.step("waiting"):
            os.kill(os.getpid(), signal.SIGHUP)
            await asyncio.sleep(0)  # an ignored signal is discarded by the kernel at once
        return 0

    assert longrun.run(progress, main) == 0
    assert "SIGHUP" not in capfd.readouterr().err
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_a_signal_in_synchronous_code_interrupts_it_too(
    capfd: pytest.CaptureFixture[str], default_dispositions: None
) -> None:
    progress = Progress("cmd", unit=None)

    def body() -> int:
        with progress.step("building"):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()  # the handler interrupts the wait
        return 0

    assert longrun.command(progress, body) == 143
    assert last_line(capfd.readouterr().err) == "cmd: interrupted by SIGTERM during building"


def test_a_system_exit_with_a_message_or_code_is_said(capfd: pytest.CaptureFixture[str]) -> None:
    progress = Progress("cmd")

    def message() -> int:
        raise SystemExit("error: no manifest files found")

    def code() -> int:
        with progress.step("x"):
            raise SystemExit(4)

    assert longrun.command(progress, message) == 1
    assert last_line(capfd.readouterr().err) == "cmd: error: no manifest files found"
    assert longrun.command(progress, code) == 4
    assert last_line(capfd.readouterr().err) == "cmd: exited with code 4 after 0 scenarios, during x"


def test_a_background_task_failure_is_said_when_it_happens(capfd: pytest.CaptureFixture[str]) -> None:
    progress = Progress("cmd")

    async def main() -> int:
        async def fails() -> None:
            raise OSError("lost")

        task = asyncio.ensure_future(fails())
        await asyncio.sleep(0.01)
        del task  # never awaited: asyncio reports it when it is collected
        import gc

        gc.collect()
        return 0

    assert longrun.run(progress, main) == 0
    assert "cmd: a background task failed: OSError: lost" in capfd.readouterr().err


def test_exit_status_names_a_killing_signal() -> None:
    assert longrun.exit_status(-9) == "was killed by SIGKILL: out of memory? (see dmesg)"
    assert longrun.exit_status(-15) == "was killed by SIGTERM"
    assert longrun.exit_status(3) == "exited with code 3"
    assert longrun.exit_status(None) == "is running"


def test_a_child_killed_meanwhile_is_named_on_the_error_line(capfd: pytest.CaptureFixture[str]) -> None:
    progress = Progress("cmd")
    child = subprocess.Popen(["sleep", "30"])
    progress.diagnostics.append(
        lambda: [f"sleep {longrun.exit_status(child.poll())}"] if child.poll() is not None else []
    )

    def body() -> int:
        with progress.scenario("s"), progress.step("waiting for the child"):
            child.kill()  # what the OOM killer does
            child.wait()
            raise ConnectionResetError("the child hung up")

    assert longrun.command(progress, body) == 2
    assert last_line(capfd.readouterr().err) == (
        "cmd: error after 0 scenarios, during s/waiting for the child: ConnectionResetError: the child "
        "hung up (meanwhile: sleep was killed by SIGKILL: out of memory? (see dmesg))"
    )


def test_run_async_runs_on_the_loop_it_is_given() -> None:
    async def kind() -> type:
        return type(asyncio.get_running_loop())

    assert longrun.run_async(kind(), loop_factory=loops.new_event_loop) is uvloop.Loop
    assert longrun.run_async(kind()) is not uvloop.Loop  # asyncio's, as before
