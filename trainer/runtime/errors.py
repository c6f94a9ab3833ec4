"""What the runtime framework hands back instead of raising a plain error: build failures.

``RuntimeFailure`` carries an error the reconciler reports (a missing runtime, an unsupported MPI
implementation, a failed read); the reconciler turns it into an event. Field errors are
``manager.meta.field.FieldError`` (Go's ``field.Error`` and its texts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from manager.meta.field import FieldError

__all__ = ["PluginFailure", "RuntimeFailure"]


@dataclass
class RuntimeFailure(Exception):
    """The runtime could not build objects; ``message`` is the text upstream reports.

    ``field_errors`` is set when bad input (rather than the cluster) is the cause, so a
    caller can show where the input is wrong.
    """

    message: str
    field_errors: list[FieldError] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


@dataclass
class PluginFailure(RuntimeFailure):
    """A third-party runtime plugin raised: only the TrainJob being handled fails (``plugin`` names it)."""

    plugin: str = ""
