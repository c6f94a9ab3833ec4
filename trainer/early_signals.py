"""SIGTERM or SIGINT while the entry point is still starting: kept, then a clean exit.

Until the manager runs, Python's default action for SIGTERM is to die (exit -15), and for
SIGINT a KeyboardInterrupt traceback. Starting takes seconds (imports, discovery, the CRD
check, every component's set-up), and Kubernetes sends SIGTERM whenever it likes: a rolling
update, a Deployment scaled down, or a replica restarted after a lost lease and stopped right
after. So the entry points record those signals from their first line (this module imports
only the standard library) and ``manager.manager.signals.run_until_signalled`` then exits 0
without starting the manager. A second signal exits at once with 1, as it does later.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

__all__ = ["defer", "received"]

received: list[signal.Signals] = []
"""The signals that arrived since ``defer``, in order."""


def _record(signum: int, _frame: FrameType | None) -> None:
    received.append(signal.Signals(signum))
    if len(received) > 1:
        os._exit(1)


def defer() -> None:
    """Record SIGTERM and SIGINT instead of dying (the manager's own handlers replace these)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _record)
