"""A suspended TrainJob whose overrides are removed, then resumed (as Kueue does on preemption).

Kueue adds ``podTemplateOverrides`` (node selector, labels) when it admits a TrainJob and
removes them when it suspends it again. The JobSet apply then leaves the pod template's
``metadata: {}`` without the labels this manager owned, which server-side apply turns into
``null`` and the API server refuses, on every attempt: the JobSet never resumes (upstream does
the same; docs/divergences.md, "An override removed while suspended leaves no null behind").
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from test_trainer_controllers_live import JOBSET, _edit_trainjob, _get
from trainer_wrappers import RES4, rjob, rjob_of, runtime, trainjob

from manager.client import NotFound
from manager.testing.eventually import eventually

Json = dict[str, Any]


def _pod_template(jobset: Json) -> Json:
    pod: Json = rjob_of(jobset, "node")["template"]["spec"]["template"]
    return pod


async def test_overrides_removed_while_suspended_then_resumed_reach_the_jobset(
    trainer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client, ns = trainer.client, trainer.namespace
    node = rjob("node", container={"image": "test:runtime", "resources": RES4})
    await client.create(runtime("alpha", ns, rjobs=[node], ml_policy={"numNodes": 1, "torch": {}}))
    override = {
        "targetJobs": [{"name": "node"}],
        "metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}, "annotations": {"flavor": "a100"}},
        "spec": {"nodeSelector": {"pool": "a100"}},
    }
    await client.create(
        trainjob("alpha", ns, "alpha", suspend=True, trainer={"image": "t"}, podTemplateOverrides=[override])
    )

    async def overridden() -> None:
        try:
            pod = _pod_template(await _get(client, JOBSET, "alpha", ns))
        except NotFound as err:
            raise AssertionError("no JobSet yet") from err
        assert pod["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "node"}
        assert pod["spec"]["nodeSelector"] == {"pool": "a100"}

    await eventually(overridden, timeout=30, message="the override never reached the JobSet")
    caplog.clear()
    await _edit_trainjob(client, ns, podTemplateOverrides=None)

    async def override_gone() -> None:
        pod = _pod_template(await _get(client, JOBSET, "alpha", ns))
        assert not (pod.get("metadata") or {}).get("labels"), pod.get("metadata")
        assert "nodeSelector" not in pod["spec"]

    await eventually(override_gone, timeout=30, message="the suspended JobSet kept the removed override")
    await _edit_trainjob(client, ns, suspend=False)

    async def resumed() -> None:
        jobset = await _get(client, JOBSET, "alpha", ns)
        assert jobset["spec"]["suspend"] is False

    await eventually(resumed, timeout=30, message="the JobSet never resumed")
    # the session's manager serves every test's namespace: only this TrainJob's errors count
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and ns in r.getMessage()]
    assert errors == []
