"""The console script ``trainer-controller-manager``: signals deferred (``early_signals``) before
the entry point's imports, then the entry point (``python -m trainer`` does the same itself)."""

from __future__ import annotations

import sys

from trainer import early_signals


def main() -> int:
    early_signals.defer()
    from trainer.__main__ import main as entry_point

    return entry_point(sys.argv[1:])
