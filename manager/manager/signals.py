"""SIGTERM/SIGINT handling: the first signal stops the manager gracefully, the second exits(1).

Kubernetes sends SIGTERM and waits ``terminationGracePeriodSeconds`` before SIGKILL; a graceful
stop lets controllers finish their current reconcile and, with ``release_on_cancel``, hands the
lease over at once. An impatient second Ctrl-C still gets an immediate exit.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Sequence
from typing import Protocol

import structlog

log = structlog.get_logger("manager.signals")

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install(stop: Callable[[], None], *, exit: Callable[[int], None] = os._exit) -> Callable[[], None]:
    """Route SIGTERM/SIGINT on the running loop to ``stop`` (then ``exit(1)``); returns an uninstaller."""
    loop = asyncio.get_running_loop()
    received = 0

    def handle(sig: signal.Signals) -> None:
        nonlocal received
        received += 1
        if received == 1:
            log.info("received signal, shutting down gracefully", signal=sig.name)
            stop()
        else:
            log.info("received second signal, exiting immediately", signal=sig.name)
            exit(1)

    for sig in SIGNALS:
        loop.add_signal_handler(sig, handle, sig)

    def uninstall() -> None:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)

    return uninstall


class _Stoppable(Protocol):
    def stop(self) -> None: ...

    async def run(self) -> None: ...


async def run_until_signalled(mgr: _Stoppable, pending: Sequence[signal.Signals] = ()) -> int:
    """Run ``mgr`` with SIGTERM/SIGINT wired to a graceful stop; return the process exit code.

    0 after a graceful stop; 1 when the lease was lost or a runnable failed (logged), so the
    pod restarts and a lost leader never keeps working. ``pending``: signals the program
    recorded while it was still starting (checked once the handlers are in place); with one,
    the manager is not started at all and the exit is 0.
    """
    uninstall = install(mgr.stop)
    if pending:
        uninstall()
        log.info("received signal before the manager started, exiting", signal=pending[0].name)
        return 0
    try:
        await mgr.run()
    except Exception as err:
        log.error("manager stopped with an error", error=str(err), exc_info=err)
        return 1
    finally:
        uninstall()
    return 0
