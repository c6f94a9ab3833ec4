"""Upstream's doc examples produce, field for field, the Jobs and Service upstream would create.

Each example (``examples/*.yaml``, as in kubernetes-sigs/jobset v0.10.1) is stored the way the
API server would store it: CRD structural defaults (``groupName``, ``replicas``,
``restartStrategy``) and our mutating webhook's defaults, uid ``uid-1``, namespace ``default``.
One reconcile on the fake client then creates objects, which are compared with literal YAML
written from jobset.md 2.8/2.9 and upstream's constructJob/constructHeadlessService; the
``job-key`` values were computed with ``sha1sum`` in a shell, not with our code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from jsfixtures import RecordingClient, reconciler

from manager import Request
from webhooks.jobset import default_jobset

Object = dict[str, Any]
EXAMPLES = Path(__file__).parent / "examples"
SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp")


def stored(example: str) -> Object:
    js: Object = yaml.safe_load((EXAMPLES / example).read_text())
    js["metadata"].update(namespace="default", uid="uid-1")
    for rjob in js["spec"]["replicatedJobs"]:
        rjob.setdefault("groupName", "default")
        rjob.setdefault("replicas", 1)
    if js["spec"].get("failurePolicy") is not None:
        js["spec"]["failurePolicy"].setdefault("restartStrategy", "Recreate")
    default_jobset(js)
    return js


async def created(example: str) -> tuple[dict[str, Object], dict[str, Object]]:
    js = stored(example)
    client = RecordingClient(js)
    rec, _, _ = reconciler(client)
    await rec.reconcile(Request("default", js["metadata"]["name"]))
    jobs, services = {}, {}
    for obj in client.created:
        for key in SERVER_FIELDS:
            obj["metadata"].pop(key, None)
        (jobs if obj["kind"] == "Job" else services)[obj["metadata"]["name"]] = obj
    return jobs, services


def owner(name: str) -> list[Object]:
    return [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": name,
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def headless(name: str, js_name: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": owner(js_name)},
        "spec": {
            "clusterIP": "None",
            "selector": {"jobset.sigs.k8s.io/jobset-name": js_name},
            "publishNotReadyAddresses": True,
        },
    }


EXPECTED: dict[str, tuple[str, str]] = {
    "simple.yaml": (
        "sleep-workers-0",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: sleep-workers-0
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: sleep
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: workers
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "1"
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 143cab4c6398c003d5c1610557b0783d987ceaab
    jobset.sigs.k8s.io/job-global-index: "0"
    jobset.sigs.k8s.io/global-replicas: "2"
    jobset.sigs.k8s.io/job-group-index: "0"
    jobset.sigs.k8s.io/group-replicas: "2"
  annotations: *std
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: sleep, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  parallelism: 4
  completions: 4
  backoffLimit: 0
  completionMode: Indexed
  suspend: false
  template:
    metadata: {labels: *std, annotations: *std}
    spec:
      containers: [{name: sleep, image: busybox, command: [sleep, "100"]}]
      restartPolicy: OnFailure
      subdomain: sleep
""",
    ),
    "failure-policy.yaml": (
        "failurepolicy-worker1-0",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: failurepolicy-worker1-0
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: failurepolicy
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: worker1
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "1"
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 1c995a5dcdcd47abf57172631c8f6024d0348027
    jobset.sigs.k8s.io/job-global-index: "0"
    jobset.sigs.k8s.io/global-replicas: "2"
    jobset.sigs.k8s.io/job-group-index: "0"
    jobset.sigs.k8s.io/group-replicas: "2"
  annotations: *std
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: failurepolicy, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  backoffLimit: 0
  completionMode: Indexed
  completions: 2
  parallelism: 2
  suspend: false
  template:
    metadata: {labels: *std, annotations: *std}
    spec:
      restartPolicy: Never
      containers: [{name: worker, image: "bash:latest", command: [bash, -xc, exit 1]}]
      subdomain: failurepolicy
""",
    ),
    "success-policy.yaml": (
        "success-policy-workers-0",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: success-policy-workers-0
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: success-policy
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: workers
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "1"
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 23f80dd8862152e31b765a6eb95459c183d336e1
    jobset.sigs.k8s.io/job-global-index: "1"
    jobset.sigs.k8s.io/global-replicas: "2"
    jobset.sigs.k8s.io/job-group-index: "1"
    jobset.sigs.k8s.io/group-replicas: "2"
  annotations: *std
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: success-policy, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  backoffLimit: 0
  completions: 2
  parallelism: 2
  completionMode: Indexed
  suspend: false
  template:
    metadata: {labels: *std, annotations: *std}
    spec:
      containers: [{name: worker, image: "bash:latest", command: [bash, -xc, sleep 10]}]
      restartPolicy: OnFailure
      subdomain: success-policy
""",
    ),
    "startup-policy.yaml": (
        "startup-driver-ready-driver-0",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: startup-driver-ready-driver-0
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: startup-driver-ready
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: driver
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "1"
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 3fba32b059b8cff4937b990e3e9f88adcb58284d
    jobset.sigs.k8s.io/job-global-index: "0"
    jobset.sigs.k8s.io/global-replicas: "2"
    jobset.sigs.k8s.io/job-group-index: "0"
    jobset.sigs.k8s.io/group-replicas: "2"
  annotations: *std
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: startup-driver-ready, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  parallelism: 1
  completions: 1
  backoffLimit: 0
  completionMode: Indexed
  suspend: false
  template:
    metadata: {labels: *std, annotations: *std}
    spec:
      containers:
      - name: sleep
        image: busybox
        command: [sleep]
        args: [1000s]
        readinessProbe: {exec: {command: [echo, ready]}, initialDelaySeconds: 30}
      restartPolicy: OnFailure
      subdomain: startup-driver-ready
""",
    ),
    "depends-on.yaml": (
        "multiple-depends-on-model-initializer-0",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: multiple-depends-on-model-initializer-0
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: multiple-depends-on
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: model-initializer
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "1"
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 7967945f9a55cd7b8dcb0a0f97c34d31fb64ee42
    jobset.sigs.k8s.io/job-global-index: "1"
    jobset.sigs.k8s.io/global-replicas: "3"
    jobset.sigs.k8s.io/job-group-index: "1"
    jobset.sigs.k8s.io/group-replicas: "3"
  annotations: *std
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: multiple-depends-on, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  completionMode: Indexed
  suspend: false
  template:
    metadata: {labels: *std, annotations: *std}
    spec:
      containers: [{name: initializer, image: busybox, command: [/bin/sh, -c, sleep 10]}]
      restartPolicy: OnFailure
      subdomain: multiple-depends-on
""",
    ),
    "coordinator.yaml": (
        "coordinator-example-workers-0",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: coordinator-example-workers-0
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: coordinator-example
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: workers
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "1"
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 38fa17ad3443313067db1ccafd86e714448dfe2f
    jobset.sigs.k8s.io/job-global-index: "0"
    jobset.sigs.k8s.io/global-replicas: "2"
    jobset.sigs.k8s.io/job-group-index: "0"
    jobset.sigs.k8s.io/group-replicas: "2"
    jobset.sigs.k8s.io/coordinator: coordinator-example-driver-0-0.coordinator-example
  annotations: *std
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: coordinator-example, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  parallelism: 4
  completions: 4
  backoffLimit: 0
  completionMode: Indexed
  suspend: false
  template:
    metadata: {labels: *std, annotations: *std}
    spec:
      containers: [{name: sleep, image: busybox, command: [sleep], args: [100s]}]
      restartPolicy: OnFailure
      subdomain: coordinator-example
""",
    ),
    "network.yaml": (
        "network-jobset-workers-0",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: network-jobset-workers-0
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: network-jobset
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: workers
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "1"
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 94a7d9e17c4eab7176c9fab80f3b2b17176bcf60
    jobset.sigs.k8s.io/job-global-index: "1"
    jobset.sigs.k8s.io/global-replicas: "2"
    jobset.sigs.k8s.io/job-group-index: "1"
    jobset.sigs.k8s.io/group-replicas: "2"
  annotations: *std
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: network-jobset, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  backoffLimit: 0
  completions: 2
  parallelism: 2
  completionMode: Indexed
  suspend: false
  template:
    metadata: {labels: *std, annotations: *std}
    spec:
      containers: [{name: worker, image: "bash:latest", command: [bash, -xc, sleep 3600]}]
      restartPolicy: OnFailure
      subdomain: example
""",
    ),
    "ttl.yaml": (
        "jobset-with-ttl-workers-0",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: jobset-with-ttl-workers-0
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: jobset-with-ttl
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: workers
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "1"
    jobset.sigs.k8s.io/job-index: "0"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 0a4cbc87fe9a43f4ca0fad3195653a36b132a4c2
    jobset.sigs.k8s.io/job-global-index: "0"
    jobset.sigs.k8s.io/global-replicas: "1"
    jobset.sigs.k8s.io/job-group-index: "0"
    jobset.sigs.k8s.io/group-replicas: "1"
  annotations: *std
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: jobset-with-ttl, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  parallelism: 4
  completions: 4
  backoffLimit: 0
  completionMode: Indexed
  suspend: false
  template:
    metadata: {labels: *std, annotations: *std}
    spec:
      containers: [{name: sleep, image: busybox, command: [sleep], args: [100s]}]
      restartPolicy: OnFailure
      subdomain: jobset-with-ttl
""",
    ),
    "exclusive-placement.yaml": (
        "exclusive-placement-workers-2",
        """
apiVersion: batch/v1
kind: Job
metadata:
  name: exclusive-placement-workers-2
  namespace: default
  labels: &std
    jobset.sigs.k8s.io/jobset-name: exclusive-placement
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: workers
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "3"
    jobset.sigs.k8s.io/job-index: "2"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 2891df6698c4bece7aa3387d11e8a50261ebd0b3
    jobset.sigs.k8s.io/job-global-index: "2"
    jobset.sigs.k8s.io/global-replicas: "3"
    jobset.sigs.k8s.io/job-group-index: "2"
    jobset.sigs.k8s.io/group-replicas: "3"
  annotations: &ann
    jobset.sigs.k8s.io/jobset-name: exclusive-placement
    jobset.sigs.k8s.io/jobset-uid: uid-1
    jobset.sigs.k8s.io/replicatedjob-name: workers
    jobset.sigs.k8s.io/group-name: default
    jobset.sigs.k8s.io/replicatedjob-replicas: "3"
    jobset.sigs.k8s.io/job-index: "2"
    jobset.sigs.k8s.io/restart-attempt: "0"
    jobset.sigs.k8s.io/job-key: 2891df6698c4bece7aa3387d11e8a50261ebd0b3
    jobset.sigs.k8s.io/job-global-index: "2"
    jobset.sigs.k8s.io/global-replicas: "3"
    jobset.sigs.k8s.io/job-group-index: "2"
    jobset.sigs.k8s.io/group-replicas: "3"
    alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: exclusive-placement, uid: uid-1, controller: true, blockOwnerDeletion: true}]
spec:
  parallelism: 3
  completions: 3
  backoffLimit: 10
  completionMode: Indexed
  suspend: false
  template:
    metadata: {labels: *std, annotations: *ann}
    spec:
      containers: [{name: sleep, image: busybox, command: [sleep], args: [1000s]}]
      restartPolicy: OnFailure
      subdomain: exclusive-placement
""",
    ),
}

# Jobs the first reconcile creates (InOrder and dependsOn gate the later rjobs) and the Service.
FIRST_PASS: dict[str, tuple[list[str], str | None]] = {
    "simple.yaml": (["sleep-driver-0", "sleep-workers-0"], "sleep"),
    "failure-policy.yaml": (["failurepolicy-worker1-0", "failurepolicy-worker2-0"], "failurepolicy"),
    "success-policy.yaml": (["success-policy-leader-0", "success-policy-workers-0"], "success-policy"),
    "startup-policy.yaml": (["startup-driver-ready-driver-0"], "startup-driver-ready"),
    "depends-on.yaml": (
        ["multiple-depends-on-dataset-initializer-0", "multiple-depends-on-model-initializer-0"],
        "multiple-depends-on",
    ),
    "coordinator.yaml": (
        ["coordinator-example-driver-0", "coordinator-example-workers-0"],
        "coordinator-example",
    ),
    "network.yaml": (["network-jobset-leader-0", "network-jobset-workers-0"], "example"),
    "ttl.yaml": (["jobset-with-ttl-workers-0"], "jobset-with-ttl"),
    "exclusive-placement.yaml": (
        ["exclusive-placement-workers-0", "exclusive-placement-workers-1", "exclusive-placement-workers-2"],
        "exclusive-placement",
    ),
}


@pytest.mark.parametrize("example", sorted(EXPECTED))
async def test_doc_example_objects(example: str) -> None:
    jobs, services = await created(example)
    names, service = FIRST_PASS[example]
    assert sorted(jobs) == names
    job_name, literal = EXPECTED[example]
    assert jobs[job_name] == yaml.safe_load(literal)
    js_name = stored(example)["metadata"]["name"]
    assert services == ({service: headless(service, js_name)} if service else {})
