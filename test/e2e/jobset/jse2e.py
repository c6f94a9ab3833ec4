"""JobSet e2e helpers: our controllers and webhooks on the full local cluster (Job controller, GC, scheduler, KWOK)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manager.client.errors import Conflict, NotFound
from manager.meta.gvk import JOB as JOB_GVK
from manager.testing import eventually
from trainer.api import jobset_constants as c
from trainer.controllers.jobset.reconciler import JOBSET_GVK

ROOT = Path(__file__).resolve().parents[3]
Object = dict[str, Any]


def e2e_rjob(name: str, replicas: int, **job_spec: Any) -> Object:
    spec: Object = {
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1"]}],
            }
        },
    }
    spec.update(job_spec)
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def e2e_jobset(namespace: str, name: str, *rjobs: Object, **spec: Any) -> Object:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }


@dataclass
class Cluster2:
    api: Any
    namespace: str

    async def jobset(self, name: str) -> Object:
        result: Object = await self.api.get(JOBSET_GVK, name, self.namespace)
        return result

    async def jobs(self, name: str) -> list[Object]:
        items = await self.api.list(JOB_GVK, namespace=self.namespace, label_selector={c.JobSetNameKey: name})
        return list(items)

    async def update_js(self, name: str, mutate: Any) -> None:
        """Read-modify-write, retried when the controller's status write got in between."""
        while True:
            js = await self.jobset(name)
            mutate(js)
            try:
                await self.api.update(js)
                return
            except Conflict:
                continue

    async def wait_condition(self, name: str, type_: str, timeout: float = 120) -> Object:
        async def check() -> Object:
            js = await self.jobset(name)
            for cond in (js.get("status") or {}).get("conditions") or []:
                if cond["type"] == type_ and cond["status"] == "True":
                    result: Object = cond
                    return result
            raise AssertionError(f"{name}: no {type_}=True in {js.get('status')}")

        return await eventually(check, timeout=timeout)

    async def wait_gone(self, name: str, timeout: float = 120) -> None:
        async def check() -> None:
            try:
                await self.jobset(name)
            except NotFound:
                return
            raise AssertionError(f"JobSet {name} still exists")

        await eventually(check, timeout=timeout)
