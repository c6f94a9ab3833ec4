"""RunSettings: a worked example of a third-party Trainer runtime plugin (docs/plugins.md).

For every TrainJob whose runtime carries the label ``example.com/run-settings: "true"`` in its
JobSet template metadata (seen as ``info.labels``), it

* (EnforceMLPolicy) sets ``RUN_SETTINGS=/etc/run-settings`` on the trainer containers, and
* (ComponentBuilder) builds a ConfigMap ``<trainjob>-run-settings`` owned by the TrainJob, with
  the TrainJob's number of nodes.

A TrainJob labelled ``example.com/explode: "true"`` makes it raise, to show that a failing
plugin fails only that TrainJob.
"""

from __future__ import annotations

from typing import Any

from trainer.runtime.objects import name_of, namespace_of, owner_reference

LABEL = "example.com/run-settings"


class RunSettings:
    name = "RunSettings"

    def __init__(self, context: Any) -> None:
        self.reader = context.reader  # the manager's cache reader (unused here)

    @staticmethod
    def _wanted(info: Any) -> bool:
        return info is not None and (info.labels or {}).get(LABEL) == "true"

    def enforce_ml_policy(self, info: Any, trainjob: Any) -> None:
        if not self._wanted(info) or trainjob is None:
            return
        if ((trainjob.metadata.labels or {}) if trainjob.metadata else {}).get(
            "example.com/explode"
        ) == "true":
            raise ZeroDivisionError("the example plugin was asked to explode")
        for pod_set in info.template_spec.pod_sets:
            if pod_set.ancestor == "trainer":
                for container in pod_set.containers:
                    container.env = [e for e in container.env if e.get("name") != "RUN_SETTINGS"]
                    container.env.append({"name": "RUN_SETTINGS", "value": "/etc/run-settings"})

    async def build(self, info: Any, trainjob: Any) -> list[dict[str, Any]]:
        if not self._wanted(info) or trainjob is None:
            return []
        nodes = trainjob.spec.trainer.num_nodes if trainjob.spec and trainjob.spec.trainer else None
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{name_of(trainjob)}-run-settings",
                    "namespace": namespace_of(trainjob),
                    "ownerReferences": [owner_reference(trainjob)],
                },
                "data": {"numNodes": str(nodes or 1)},
            }
        ]
