"""Errors raised while building or running a local control plane."""

from __future__ import annotations

from manager.errors import Error


class EnvtestError(Error):
    """Base class for local control plane failures."""


class AssetBuildError(EnvtestError):
    """A control-plane binary could not be found or built."""

    def __init__(self, step: str, detail: str) -> None:
        super().__init__(f"building control-plane binaries failed at step {step!r}: {detail}")
        self.step = step
        self.detail = detail


class StartError(EnvtestError):
    """A control-plane process did not become ready."""

    def __init__(self, component: str, reason: str, log_tail: str = "") -> None:
        message = f"{component} did not start: {reason}"
        if log_tail:
            message += f"\n--- last lines of the {component} log ---\n{log_tail}"
        super().__init__(message)
        self.component = component
