"""The start-up check: the TrainJob CRD in the cluster is the one of the manager's level.

Why: a v2.3 manager over v2.1 CRDs (or the reverse) would have the API server prune the fields
its clients write (``runtimePatches``, ``activeDeadlineSeconds``) or keep the ones it no
longer reads (``podTemplateOverrides``), silently. Refusing to start says so at once.
"""

from __future__ import annotations

import asyncio

import structlog

from manager.client.errors import NotFound, RequestError, is_transient
from manager.client.interfaces import Reader
from manager.scheme import GroupVersionKind
from trainer import features
from trainer.levels import LEVELS, of_trainjob_crd
from trainer.levels.level import ApiLevel, CrdLevelMismatch

__all__ = ["CRD_GVK", "TRAINJOB_CRD", "check_trainjob_crd", "feature_gate_errors"]

log = structlog.get_logger("trainer.levels")

CRD_GVK = GroupVersionKind("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
TRAINJOB_CRD = "trainjobs.trainer.kubeflow.org"


async def check_trainjob_crd(reader: Reader, level: ApiLevel, *, retry_seconds: float = 60.0) -> None:
    """Raise ``CrdLevelMismatch`` (one line naming both) when the installed TrainJob CRD is not
    ``level``'s. No TrainJob CRD at all passes: the trainer component then skips itself.

    A transient answer (no answer, 429, 5xx) is asked again with backoff for up to
    ``retry_seconds``, as discovery is: a manager starting while the API server is briefly away
    waits for it instead of exiting."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + retry_seconds
    delay = 0.5
    while True:
        try:
            crd = await reader.get(CRD_GVK, TRAINJOB_CRD)
            break
        except NotFound:
            return
        except RequestError as err:
            if not is_transient(err) or loop.time() + delay > deadline:
                raise
            log.info("reading the TrainJob CRD failed, retrying", delay=delay, error=str(err))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
    installed = of_trainjob_crd(crd)
    if installed is level:
        return
    found = (
        f"of API level {installed.describe()}"
        if installed is not None
        else f"of no API level this manager knows ({', '.join(LEVELS)})"
    )
    fix = f"install the CRDs of config/{level.manifests}"
    if installed is not None:
        fix += f" or set apiLevel: {installed.name} in the Configuration"
    raise CrdLevelMismatch(
        f"the installed TrainJob CRD ({TRAINJOB_CRD}) is {found}, "
        f"but this manager runs API level {level.describe()}: {fix}"
    )


def feature_gate_errors(level: ApiLevel, named: frozenset[str]) -> list[str]:
    """One error per JobSet feature gate in ``named`` that the level's JobSet release does not
    have: naming it (even ``false``) is a mistake about the level, which the Go jobset of that
    release would refuse too (``unrecognized feature gate``); the error says which level has it."""
    errors = []
    for name in sorted(named):
        spec = features.KNOWN.get(name)
        if spec is None or spec.component != features.JOBSET or name in level.jobset.feature_gates:
            continue
        owners = [other for other in LEVELS.values() if name in other.jobset.feature_gates]
        where = ", ".join(f"jobset {other.jobset_version} (API level {other.name})" for other in owners)
        errors.append(
            f"featureGates.{name}: Forbidden: {name} is a feature gate of {where}; this manager runs API "
            f"level {level.describe()}, whose JobSet has no such gate"
        )
    return errors
