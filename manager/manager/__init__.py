"""The manager: starts every runnable (servers, webhooks, caches, controllers) in
controller-runtime's order, elects a leader, and stops them all within one shutdown budget.

``signals.run_until_signalled(mgr)`` runs it until SIGTERM/SIGINT.
"""

from manager.manager.manager import (
    Group,
    LeaderElectionLost,
    Manager,
    Options,
    ShutdownTimeoutError,
)

__all__ = ["Group", "LeaderElectionLost", "Manager", "Options", "ShutdownTimeoutError"]
