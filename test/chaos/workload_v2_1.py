"""The chaos workload at API level v2.1 (Trainer v2.1.0, JobSet v0.10.1): the flavours both levels
share (``workload.FLAVOURS``) on v2.1's shipped runtimes (``config/runtimes``).

Mix (per 20 TrainJobs): 6 torch, 3 deepspeed, 3 MPI, 3 gang, 2 deadline, 3 suspended; plain
JobSets, every 5th with the deadline (Failed).
"""

from __future__ import annotations

from workload import (
    ROOT,
    Json,
    LevelWorkload,
    common_jobset,
    common_runtimes,
    common_trainjob,
    shipped_runtime_docs,
)

SHIPPED = (
    ROOT / "config" / "runtimes" / "torch-distributed.yaml",
    ROOT / "config" / "runtimes" / "deepspeed-distributed.yaml",
)


def _trainjob(name: str, namespace: str, flavour: str, _deadline_seconds: float) -> Json:
    return common_trainjob(name, namespace, flavour)


def _no_updates(_name: str, _flavour: str) -> tuple[Json, ...]:
    return ()


def _runtimes(namespace: str) -> list[Json]:
    return common_runtimes(shipped_runtime_docs(SHIPPED), namespace)


V2_1 = LevelWorkload(
    name="v2.1",
    mix=("torch",) * 6
    + ("deepspeed",) * 3
    + ("mpi",) * 3
    + ("gang",) * 3
    + ("deadline",) * 2
    + ("suspended",) * 3,
    jobset_mix=("jobset",) * 4 + ("jobset-deadline",),
    trainjob=_trainjob,
    trainjob_updates=_no_updates,
    jobset=common_jobset,
    shipped_runtimes=SHIPPED,
    namespaced_runtimes=_runtimes,
    runtime_snapshots=False,
)
