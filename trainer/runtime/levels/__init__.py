"""What the runtime framework takes from an API level (trainer/levels, docs/levels.md).

The runtime's steps are shared by every level except where a TrainJob says how its runtime is
customised: v2.1 has ``spec.labels``/``spec.annotations`` and ``podTemplateOverrides``, v2.3
has ``runtimePatches``. Each level's way lives in its own module here (``v2_1.py``,
``v2_3.py``) behind the ``RuntimeLevel`` Protocol; ``trainer/levels`` hands the chosen one to
the runtimes through the ``SetupContext``.
"""

from __future__ import annotations

from typing import Protocol

from manager.meta.object import Json
from trainer.api.trainer_v1alpha1 import JobSetTemplateSpec, TrainJob

__all__ = ["RuntimeLevel"]


class RuntimeLevel(Protocol):
    """The level-specific steps of ``newRuntimeInfo`` (docs/behaviour/trainer.md §2.4)."""

    name: str

    def jobset_metadata(
        self, trainjob: TrainJob, template: JobSetTemplateSpec | None
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Step 1: the JobSet's labels and annotations."""
        ...

    def customise_jobset_spec(self, trainjob: TrainJob, jobset_spec: Json) -> None:
        """Step 2: the TrainJob's changes to the runtime's JobSetSpec document, in place."""
        ...
