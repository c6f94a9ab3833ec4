"""TrainJob validating webhook (docs/behaviour/trainer.md §5.3): the runtime's plugins judge the TrainJob.

Why through the runtime: what a TrainJob may say depends on the runtime it references
(initializer jobs, the ML policy, overrides of jobs that must exist), so the webhook looks the
runtime up by the runtimeRef's GroupKind and returns its warnings and aggregated field errors.
Errors are plain (not API statuses), so the API server reports 403 Forbidden with the text
``admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: <errors>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager.webhook import deny_with_warnings, validate_path
from trainer.api import trainer_constants as tc
from trainer.runtime.errors import aggregate
from trainer.runtime.registry import Runtime, runtime_key

Json = dict[str, Any]

__all__ = ["PATH", "TrainJobValidator"]

PATH = validate_path(tc.GROUP, tc.VERSION, tc.TrainJobKind)


class TrainJobValidator:
    """``CustomValidator`` for TrainJobs: create and update validated alike, delete always allowed."""

    def __init__(self, runtimes: Mapping[str, Runtime]) -> None:
        self.runtimes = runtimes

    async def validate_create(self, obj: Json) -> list[str] | None:
        return await self._validate(None, obj)

    async def validate_update(self, old: Json, new: Json) -> list[str] | None:
        return await self._validate(old, new)

    async def validate_delete(self, obj: Json) -> list[str] | None:
        return None

    async def _validate(self, old: Json | None, new: Json) -> list[str]:
        ref = (new.get("spec") or {}).get("runtimeRef") or {}
        key = runtime_key(ref.get("apiGroup"), ref.get("kind"))
        runtime = self.runtimes.get(key)
        if runtime is None:
            raise ValueError(f"unsupported runtime: {key}")
        warnings, errors = await runtime.validate_objects(old, new)
        if errors:
            raise deny_with_warnings(ValueError(aggregate(errors)), warnings)
        return warnings
