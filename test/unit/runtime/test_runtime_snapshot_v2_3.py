"""The runtime snapshot at level v2.3 (Trainer v2.3.0 ``pkg/runtime/core/snapshot.go``;
docs/behaviour/trainer.md §12.10): the first build of a TrainJob applies its runtime as the
ConfigMap ``<trainjob>-runtime-snapshot`` and every later build reads the runtime from it, so an
edit of the runtime no longer reaches the TrainJob. Level v2.1 reads the live runtime every time."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from runtime_fixtures import FakeReader, RecordingIndexer
from test_runtime_shipped import shipped_runtime, stored_trainjob

from manager.client.errors import Forbidden
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.levels import RuntimeLevel
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.levels.v2_3_snapshot import encode_runtime, snapshot_configmap
from trainer.runtime.registry import CLUSTER_TRAINING_RUNTIME_KEY, TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]


class RecordingWriter:
    """Records server-side applies and stores what was applied in ``reader`` (as the cache will)."""

    def __init__(self, reader: FakeReader, error: Exception | None = None) -> None:
        self.reader = reader
        self.error = error
        self.applies: list[tuple[Json, str | None, bool]] = []

    async def apply(self, obj: Json, *, field_owner: str | None = None, force: bool = False) -> Json:
        self.applies.append((copy.deepcopy(obj), field_owner, force))
        if self.error is not None:
            raise self.error
        self.reader.add(obj)
        return obj


def runtime() -> Json:
    rt = shipped_runtime("torch-distributed")
    rt["metadata"].update(
        uid="rt-uid", resourceVersion="7", generation=1, creationTimestamp="2026-01-02T03:04:05Z"
    )
    return rt


def edited(rt: Json, image: str) -> Json:
    rt = copy.deepcopy(rt)
    for job in rt["spec"]["template"]["spec"]["replicatedJobs"]:
        for c in job["template"]["spec"]["template"]["spec"]["containers"]:
            c["image"] = image
    return rt


def images(objects: list[Json]) -> set[str]:
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    return {
        c["image"]
        for job in jobset["spec"]["replicatedJobs"]
        for c in job["template"]["spec"]["template"]["spec"]["containers"]
    }


async def build(
    level: RuntimeLevel, reader: FakeReader, writer: Any, tj: Json, key: str = CLUSTER_TRAINING_RUNTIME_KEY
) -> list[Json]:
    runtimes = await new_runtimes(reader, RecordingIndexer(), level=level, writer=writer)
    return await runtimes[key].new_objects(tj)


async def test_v2_1_reads_the_live_runtime_every_time_and_writes_no_snapshot() -> None:
    reader = FakeReader([runtime()])
    writer = RecordingWriter(reader)
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    first = images(await build(V2_1, reader, writer, tj))
    reader.add(edited(runtime(), "edited:1"))
    assert images(await build(V2_1, reader, writer, tj)) == {"edited:1"} != first
    assert writer.applies == []


async def test_v2_3_first_build_applies_the_snapshot_controlled_by_the_trainjob() -> None:
    reader = FakeReader([runtime()])
    writer = RecordingWriter(reader)
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    await build(V2_3, reader, writer, tj)
    ((cm, owner, force),) = writer.applies
    assert (owner, force) == ("trainer", True)
    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
    assert cm["metadata"] == {
        "name": "job-runtime-snapshot",
        "namespace": "ns",
        "ownerReferences": [
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": "job",
                "uid": "job-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    assert list(cm["data"]) == ["runtime"]
    doc = yaml.safe_load(cm["data"]["runtime"])
    assert doc["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert doc["kind"] == "ClusterTrainingRuntime"
    assert doc["metadata"]["name"] == "torch-distributed"
    assert doc["metadata"]["uid"] == "rt-uid" and doc["metadata"]["resourceVersion"] == "7"
    assert doc["spec"]["mlPolicy"] == runtime()["spec"]["mlPolicy"] | doc["spec"]["mlPolicy"]


async def test_v2_3_later_builds_use_the_snapshot_not_the_edited_or_deleted_runtime() -> None:
    reader = FakeReader([runtime()])
    writer = RecordingWriter(reader)
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    first = images(await build(V2_3, reader, writer, tj))
    reader.add(edited(runtime(), "edited:1"))
    assert images(await build(V2_3, reader, writer, tj)) == first
    del reader.objects[next(k for k in reader.objects if k[0].kind == "ClusterTrainingRuntime")]
    assert images(await build(V2_3, reader, writer, tj)) == first
    assert len(writer.applies) == 1


def _snapshot(tj: Json, rt: Json, **changes: Any) -> Json:
    cm = snapshot_configmap(TrainJob.from_dict(tj), rt)
    for key, value in changes.items():
        if value is None:
            cm.pop(key)
        else:
            cm[key] = value
    return cm


@pytest.mark.parametrize(
    ("key", "prefix"),
    [
        (CLUSTER_TRAINING_RUNTIME_KEY, "getting runtime snapshot"),
        (TRAINING_RUNTIME_KEY, "unable to get runtime snapshot"),
    ],
)
async def test_v2_3_a_foreign_snapshot_fails_with_upstreams_words(key: str, prefix: str) -> None:
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    cm = _snapshot(tj, runtime())
    cm["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    reader = FakeReader([runtime(), cm])
    with pytest.raises(RuntimeFailure) as failure:
        await build(V2_3, reader, RecordingWriter(reader), tj, key)
    assert failure.value.message == (
        f"{prefix}: invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
    )


async def test_v2_3_a_snapshot_without_a_controller_is_foreign() -> None:
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    cm = _snapshot(tj, runtime())
    cm["metadata"]["ownerReferences"][0]["controller"] = False
    reader = FakeReader([runtime(), cm])
    with pytest.raises(RuntimeFailure, match=r"is owned by another object$"):
        await build(V2_3, reader, RecordingWriter(reader), tj)


async def test_v2_3_a_snapshot_without_the_runtime_key() -> None:
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    reader = FakeReader([runtime(), _snapshot(tj, runtime(), data={"other": "x"})])
    with pytest.raises(RuntimeFailure) as failure:
        await build(V2_3, reader, RecordingWriter(reader), tj)
    assert failure.value.message == (
        'getting runtime snapshot: invalid runtime snapshot: snapshot ConfigMap missing "runtime" data key'
    )


async def test_v2_3_a_snapshot_of_another_runtime() -> None:
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    other = runtime()
    other["metadata"]["name"] = "other"
    reader = FakeReader([runtime(), _snapshot(tj, other)])
    with pytest.raises(RuntimeFailure) as failure:
        await build(V2_3, reader, RecordingWriter(reader), tj)
    assert failure.value.message == (
        "getting runtime snapshot: invalid runtime snapshot: the snapshot refers to the wrong runtime: "
        'expecting a runtime with name, api group and kind of "torch-distributed", "trainer.kubeflow.org", '
        '"ClusterTrainingRuntime" but found runtime with name, api group and kind of "other", '
        '"trainer.kubeflow.org", "ClusterTrainingRuntime"'
    )


async def test_v2_3_a_snapshot_that_does_not_decode() -> None:
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    reader = FakeReader([runtime(), _snapshot(tj, runtime(), data={"runtime": "spec: ["})])
    with pytest.raises(
        RuntimeFailure,
        match=r"^getting runtime snapshot: invalid runtime snapshot: unable to unmarshal the snapshot: error converting YAML to JSON: yaml: ",
    ):
        await build(V2_3, reader, RecordingWriter(reader), tj)
    reader.add(_snapshot(tj, runtime(), data={"runtime": "metadata: {name: 5}"}))
    with pytest.raises(RuntimeFailure) as failure:
        await build(V2_3, reader, RecordingWriter(reader), tj)
    assert failure.value.message.startswith(
        "getting runtime snapshot: invalid runtime snapshot: unable to unmarshal the snapshot: "
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal number into Go struct field"
    )


async def test_v2_3_a_failed_apply_fails_the_build() -> None:
    reader = FakeReader([runtime()])
    writer = RecordingWriter(reader, Forbidden("configmaps is forbidden"))
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    with pytest.raises(RuntimeFailure) as failure:
        await build(V2_3, reader, writer, tj)
    assert failure.value.message == (
        "creating runtime snapshot: applying runtime snapshot ConfigMap: configmaps is forbidden"
    )


async def test_v2_3_a_missing_runtime_is_reported_as_before() -> None:
    reader = FakeReader([])
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    with pytest.raises(RuntimeFailure, match=r"^not found ClusterTrainingRuntime specified in TrainJob: "):
        await build(V2_3, reader, RecordingWriter(reader), tj)


def test_the_snapshot_yaml_is_gos_typed_document_keys_sorted() -> None:
    text = encode_runtime(runtime())
    doc = yaml.safe_load(text)
    assert list(doc) == sorted(doc) == ["apiVersion", "kind", "metadata", "spec"]
    # fields Go's json.Marshal writes even when empty: the templates' metadata, resources
    assert doc["spec"]["template"]["metadata"] == {}
    job = doc["spec"]["template"]["spec"]["replicatedJobs"][0]
    assert job["template"]["spec"]["template"]["metadata"] == {}
    assert job["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] == {}
    assert text == yaml.safe_dump(doc, sort_keys=True, default_flow_style=False, width=1 << 30)


def test_a_runtime_is_encoded_once_per_content_and_an_edit_is_encoded_anew() -> None:
    # every TrainJob of a runtime snapshots the same runtime: the YAML is made once for it
    rt = runtime()
    first = encode_runtime(rt)
    reordered = dict(reversed(list(copy.deepcopy(rt).items())))
    assert encode_runtime(reordered) is first
    changed = copy.deepcopy(rt)
    changed["metadata"]["resourceVersion"] = "2"
    changed["spec"]["mlPolicy"] = {"numNodes": 3}
    text = encode_runtime(changed)
    assert text != first
    doc = yaml.safe_load(text)
    assert doc["metadata"]["resourceVersion"] == "2"
    assert doc["spec"]["mlPolicy"]["numNodes"] == 3
    assert encode_runtime(rt) == first  # the unedited runtime still gets its own text


def test_volume_claim_policies_are_written_as_jobset_v0_12_0s_struct_does() -> None:
    rt = runtime()
    rt["spec"]["template"]["spec"]["volumeClaimPolicies"] = [
        {"templates": [{"metadata": {"name": "initializer"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}
    ]
    doc = yaml.safe_load(encode_runtime(rt))
    (policy,) = doc["spec"]["template"]["spec"]["volumeClaimPolicies"]
    assert policy["templates"][0]["status"] == {}
    assert policy["templates"][0]["spec"]["accessModes"] == ["ReadWriteOnce"]


async def test_v2_3_the_first_build_is_the_one_every_later_build_from_the_snapshot_makes() -> None:
    # Conformance `shipped-torchtune-cache`: the first JobSet, built from the live runtime, had
    # no `status: {}` in its volumeClaimPolicies template, the second, from the snapshot, had it,
    # and the API server refused that change ("Value is immutable").
    rt = runtime()
    rt["spec"]["template"]["spec"]["volumeClaimPolicies"] = [
        {
            "templates": [
                {
                    "metadata": {"name": "initializer"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "20Gi"}},
                    },
                }
            ]
        }
    ]
    reader = FakeReader([rt])
    writer = RecordingWriter(reader)
    tj = stored_trainjob("job", "torch-distributed", trainer={"numNodes": 1})
    (first,) = [o for o in await build(V2_3, reader, writer, tj) if o["kind"] == "JobSet"]
    (later,) = [o for o in await build(V2_3, reader, writer, tj) if o["kind"] == "JobSet"]
    assert len(writer.applies) == 1  # the second build read the snapshot
    assert first == later
    (policy,) = first["spec"]["volumeClaimPolicies"]
    assert policy["templates"][0]["status"] == {}


async def test_v2_3_a_snapshot_text_is_parsed_once_and_each_build_gets_its_own_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainer.runtime.levels import v2_3_snapshot

    reader = FakeReader([runtime()])
    writer = RecordingWriter(reader)
    jobs = [stored_trainjob(name, "torch-distributed", trainer={"numNodes": 1}) for name in ("a", "b")]
    v2_3_snapshot._parse_snapshot.cache_clear()
    parses: list[str] = []
    real = yaml.safe_load
    monkeypatch.setattr(v2_3_snapshot.yaml, "safe_load", lambda text: parses.append(text) or real(text))
    for tj in jobs * 3:  # the first build of each writes its snapshot, the later ones read it
        await build(V2_3, reader, writer, tj)
    assert len(parses) == 1  # one runtime version: one text, parsed once for both TrainJobs
    cm = snapshot_configmap(TrainJob.from_dict(jobs[0]), runtime())
    first = v2_3_snapshot.decode_snapshot(TrainJob.from_dict(jobs[0]), cm)
    first["spec"]["mlPolicy"]["numNodes"] = 99  # a build that changed what it was given
    again = v2_3_snapshot.decode_snapshot(TrainJob.from_dict(jobs[0]), cm)
    assert again["spec"]["mlPolicy"]["numNodes"] != 99
