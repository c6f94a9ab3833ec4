"""The JobSet's ``volumeClaimPolicies`` at level v2.3 (docs/behaviour/trainer.md §12.16,
docs/divergences.md T-16): the apply document carries them as the JobSet stores them -- Go's
encoding of the typed ``VolumeClaimPolicy`` (a PVC template's ``status: {}``, as upstream's
document has it) and JobSet v0.12.0's create-time default ``retentionPolicy: {whenDeleted:
Delete}`` -- from the live runtime and from the snapshot alike, so that JobSet's defaulting
webhook has nothing left to change and a later apply of the same document is no change of the
immutable list. Level v2.1 (JobSet v0.10.1, no such field) leaves the document alone.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from runtime_fixtures import FakeReader, RecordingIndexer
from test_runtime_features_v2_3 import build, go
from test_runtime_shipped import stored_trainjob
from test_runtime_snapshot_v2_3 import RecordingWriter

from trainer.api import gocodec
from trainer.jobset.levels.v0_12_admission import default_retention_policies
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]

ROOT = Path(__file__).resolve().parents[3]
QWEN = ROOT / "config" / "overlays" / "v2.3" / "runtimes" / "torchtune-qwen2.5-1.5b.yaml"

STORED_POLICIES = [
    {
        "templates": [
            {
                "metadata": {"name": "initializer"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}},
                "status": {},
            }
        ],
        "retentionPolicy": {"whenDeleted": "Delete"},
    }
]
"""What JobSet v0.12.0 stores for the shipped torchtune runtimes' policy (its webhook's default,
encoded by its Go types), as the conformance runs show on both sides."""


def qwen_runtime() -> Json:
    """Trainer v2.3.0's shipped ``torchtune-qwen2.5-1.5b`` as the API server stores it."""
    runtime: Json = yaml.safe_load(QWEN.read_text())
    runtime["metadata"].update(uid="rt-uid", resourceVersion="3", generation=1)
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        rjob.setdefault("groupName", "default")
        rjob.setdefault("replicas", 1)
    return runtime


def tune_job() -> Json:
    return stored_trainjob(
        "tune",
        "torchtune-qwen2.5-1.5b",
        trainer={"numNodes": 1, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}},
    )


def jobset_of(objects: list[Json]) -> Json:
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    return jobset


def as_jobset_v0_12_defaults(spec: Json) -> Json:
    """``spec`` after JobSet v0.12.0's defaulting webhook: Go-decoded, defaulted, re-encoded."""
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": copy.deepcopy(spec)}
    codec = gocodec.codec_for("jobset.x-k8s.io/v1alpha2", "JobSet", gocodec.JOBSET_V0_12_TYPES_FILE)
    codec.encode(jobset)
    default_retention_policies(jobset["spec"])
    return jobset["spec"]  # type: ignore[no-any-return]


async def test_v2_3_sends_the_policies_as_stored_from_the_live_runtime_and_from_the_snapshot() -> None:
    reader = FakeReader([qwen_runtime()])
    writer = RecordingWriter(reader)  # the snapshot ConfigMap lands in the reader, as in the cache
    runtimes = await new_runtimes(reader, RecordingIndexer(), level=V2_3, writer=writer)
    runtime = runtimes[CLUSTER_TRAINING_RUNTIME_KEY]

    first = jobset_of(await runtime.new_objects(tune_job()))
    assert [obj["kind"] for obj, _, _ in writer.applies] == ["ConfigMap"]  # the first build snapshots
    second = jobset_of(await runtime.new_objects(tune_job()))
    assert len(writer.applies) == 1  # the second builds from the snapshot

    assert first["spec"]["volumeClaimPolicies"] == STORED_POLICIES
    assert second == first
    # JobSet's defaulting webhook has nothing to add: the stored list is the one sent, so a
    # second apply of this document leaves the immutable list as it is
    stored = as_jobset_v0_12_defaults(first["spec"])
    assert stored["volumeClaimPolicies"] == first["spec"]["volumeClaimPolicies"]


async def test_v2_3_builds_upstreams_objects_but_for_the_default_retention_policy() -> None:
    """``volume_claim_policies`` of ``testdata/features_go_v2_3_0.json``: what Trainer v2.3.0's own
    runtime builds (``NewObjects``): the PVC templates' ``status: {}``, the quantities canonical,
    no retention policy where the runtime has none (JobSet's webhook adds it on create)."""
    ours, theirs = await build("volume_claim_policies"), go("volume_claim_policies")
    assert isinstance(ours, list) and isinstance(theirs, list)
    upstream = jobset_of(theirs)["spec"]["volumeClaimPolicies"]
    assert "retentionPolicy" not in upstream[0]
    assert upstream[1]["retentionPolicy"] == {"whenDeleted": "Retain"}
    upstream[0]["retentionPolicy"] = {"whenDeleted": "Delete"}  # the one difference (T-16)
    assert ours == theirs


def policies_doc(*policies: Json) -> Json:
    return {"volumeClaimPolicies": copy.deepcopy(list(policies))}


def template(name: str = "cache") -> Json:
    return {"metadata": {"name": name}, "spec": {"resources": {"requests": {"storage": "1024Mi"}}}}


def test_v2_3_keeps_a_retention_policy_the_runtime_sets_and_encodes_as_go_does() -> None:
    doc = policies_doc(
        {"templates": [template("kept")], "retentionPolicy": {"whenDeleted": "Retain"}},
        # an empty one is the CRD's to default (whenDeleted: Delete on every request), not ours
        {"templates": [template("crd")], "retentionPolicy": {}},
        {"templates": [template("ours")], "retentionPolicy": None},
    )
    V2_3.build.volume_claim_policies(doc)
    assert [p["retentionPolicy"] for p in doc["volumeClaimPolicies"]] == [
        {"whenDeleted": "Retain"},
        {},
        {"whenDeleted": "Delete"},
    ]
    # Go's encoding: the struct fields written even when empty, quantities canonical
    assert doc["volumeClaimPolicies"][0]["templates"] == [
        {"metadata": {"name": "kept"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}, "status": {}}
    ]


def test_v2_3_leaves_a_document_without_policies_alone() -> None:
    doc: Json = {"replicatedJobs": []}
    V2_3.build.volume_claim_policies(doc)
    assert doc == {"replicatedJobs": []}


def test_v2_1_leaves_the_policies_as_they_are() -> None:
    doc = policies_doc({"templates": [template()]})
    V2_1.build.volume_claim_policies(doc)
    assert doc == policies_doc({"templates": [template()]})
