"""The conformance runner's own logic: normalisation, the diff, listed divergences, scenarios."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainer.conformance.cli import DEFAULT_SCENARIOS, report
from trainer.conformance.diff import (
    MISSING,
    Difference,
    classify,
    compare,
    load_divergences,
)
from trainer.conformance.harness import Side
from trainer.conformance.normalize import Normaliser
from trainer.conformance.runner import (
    CONFORMANCE_API,
    Scenario,
    ScenarioResult,
    Settings,
    _apply_json_patch,
    load_scenario,
)

ROOT = Path(__file__).resolve().parents[3]


def test_every_listed_divergence_id_exists_in_docs() -> None:
    docs = (ROOT / "docs" / "divergences.md").read_text()
    ids = {d.id for d in load_divergences()}
    missing = sorted(i for i in ids if not re.search(rf"\|\s*{re.escape(i)}\s*\|", docs))
    assert not missing, f"divergences.yaml names ids absent from docs/divergences.md: {missing}"


def test_a_divergence_without_id_or_pattern_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "d.yaml"
    bad.write_text("divergences:\n- {id: T-1}\n")
    with pytest.raises(ValueError, match="id and a where pattern"):
        load_divergences(bad)


def test_volatile_values_are_normalised_and_pod_names_renamed() -> None:
    norm = Normaliser("c-x-abc123")
    pods = norm.objects(
        "Pod",
        [
            {
                "metadata": {
                    "name": "js-rj-0-0-x7k2p",
                    "generateName": "js-rj-0-0-",
                    "namespace": "c-x-abc123",
                    "uid": "0b5c2f0e-1111-2222-3333-444455556666",
                    "resourceVersion": "17",
                    "creationTimestamp": "2026-12-01T10:00:00Z",
                    "labels": {"batch.kubernetes.io/controller-uid": "0b5c2f0e-1111-2222-3333-444455556666"},
                    "ownerReferences": [{"kind": "Job", "name": "js-rj-0", "uid": "u"}],
                },
                "spec": {
                    "nodeName": "kwok-node-1",
                    "volumes": [{"name": "kube-api-access-abcde"}, {"name": "data"}],
                    "containers": [{"name": "c", "volumeMounts": [{"name": "kube-api-access-abcde"}]}],
                },
                "status": {"phase": "Succeeded", "startTime": "2026-12-01T10:00:01Z", "podIP": "10.244.0.5"},
            }
        ],
    )
    assert list(pods) == ["Pod/js-rj-0-0-<gen>"]
    pod = pods["Pod/js-rj-0-0-<gen>"]
    assert pod["metadata"]["namespace"] == "<ns>"
    assert "uid" not in pod["metadata"] and "resourceVersion" not in pod["metadata"]
    assert pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == "<uid>"
    assert pod["metadata"]["ownerReferences"] == [{"kind": "Job", "name": "js-rj-0"}]
    assert "nodeName" not in pod["spec"]
    assert pod["spec"]["volumes"] == [{"name": "data"}]
    assert pod["status"] == {"phase": "Succeeded"}
    # Events naming the generated pod read the same on both sides.
    events = norm.events(
        [
            {
                "source": {"component": "jobset"},
                "involvedObject": {"kind": "Pod", "name": "js-rj-0-0-x7k2p"},
                "type": "Normal",
                "reason": "R",
                "message": "pod js-rj-0-0-x7k2p at 2026-12-01T10:00:00Z",
            },
            {"source": {"component": "job-controller"}, "involvedObject": {"kind": "Job", "name": "j"}},
        ]
    )
    assert list(events) == ["Event/Pod/js-rj-0-0-<gen>/R"]
    assert list(events.values()) == [
        {
            "involvedObject": "Pod/js-rj-0-0-<gen>",
            "type": "Normal",
            "reason": "R",
            "message": "pod js-rj-0-0-<gen> at <time>",
        }
    ]


def test_ssh_key_material_and_cluster_ips_are_masked() -> None:
    norm = Normaliser("ns")
    secret = norm.objects(
        "Secret",
        [{"metadata": {"name": "s"}, "type": "kubernetes.io/ssh-auth", "data": {"ssh-privatekey": "QUJD"}}],
    )["Secret/s"]
    assert secret["data"] == {"ssh-privatekey": "<key material>"}
    svc = norm.objects(
        "Service",
        [{"metadata": {"name": "a"}, "spec": {"clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"]}}],
    )
    assert svc["Service/a"]["spec"]["clusterIP"] == "<ip>"
    headless = norm.objects(
        "Service", [{"metadata": {"name": "b"}, "spec": {"clusterIP": "None", "clusterIPs": ["None"]}}]
    )
    assert headless["Service/b"]["spec"]["clusterIP"] == "None"


def test_compare_prints_json_paths_and_absent_objects() -> None:
    ours = {"JobSet/a": {"spec": {"replicatedJobs": [{"name": "x", "replicas": 1}]}}, "Job/only-ours": {}}
    theirs = {"JobSet/a": {"spec": {"replicatedJobs": [{"name": "x", "replicas": 2}, {"name": "y"}]}}}
    diffs = compare("s", ours, theirs)
    wheres = [d.where for d in diffs]
    assert wheres == [
        "s: Job/only-ours .",
        "s: JobSet/a .spec.replicatedJobs[0].replicas",
        "s: JobSet/a .spec.replicatedJobs[1]",
    ]
    assert diffs[0].theirs == MISSING
    assert (diffs[1].ours, diffs[1].theirs) == (1, 2)
    assert compare("s", {"k": {"a": [1, {"b": "c"}]}}, {"k": {"a": [1, {"b": "c"}]}}) == []


def test_listed_divergences_excuse_only_their_pattern(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = tmp_path / "d.yaml"
    listed.write_text("divergences:\n- {id: T-1, where: 's: final/TrainJob/* .status.conditions*'}\n")
    diffs = [
        Difference("s", "final/TrainJob/x", ".status.conditions[0].reason", "A", "B"),
        Difference("s", "final/JobSet/x", ".status", "A", "B"),
    ]
    unlisted, excused = classify(diffs, load_divergences(listed))
    assert [d.key for d in unlisted] == ["final/JobSet/x"]
    assert [(d.key, i) for d, i in excused] == [("final/TrainJob/x", "T-1")]
    code = report([ScenarioResult("s", diffs, 3, 2, [])], listed, show_listed=True)
    out = capsys.readouterr().out
    assert code == 1
    assert "final/JobSet/x .status" in out and "[listed T-1]" in out
    assert (
        "compared 3 objects and 2 admission answers in 1 scenarios: 1 unlisted differences, 1 listed" in out
    )
    assert report([ScenarioResult("s", diffs[:1], 3, 2, [])], listed, show_listed=False) == 0


def test_json_patch_as_webhooks_answer() -> None:
    obj = {"spec": {"a": [1, 2], "b": {"c": 1}}}
    patched = _apply_json_patch(
        obj,
        [
            {"op": "add", "path": "/spec/a/-", "value": 3},
            {"op": "replace", "path": "/spec/b/c", "value": 2},
            {"op": "remove", "path": "/spec/a/0"},
            {"op": "add", "path": "/metadata", "value": {"labels": {"x~y/z": "1"}}},
        ],
    )
    assert patched == {"spec": {"a": [2, 3], "b": {"c": 2}}, "metadata": {"labels": {"x~y/z": "1"}}}
    assert obj == {"spec": {"a": [1, 2], "b": {"c": 1}}}


def test_every_scenario_parses_and_uses_known_step_fields() -> None:
    files = sorted(DEFAULT_SCENARIOS.glob("*.yaml"))
    assert len(files) >= 20
    for file in files:
        docs = load_scenario(file)
        assert docs, file
        for doc in docs:
            assert doc.get("apiVersion") and doc.get("kind"), f"{file}: {doc}"
            if doc["apiVersion"] == CONFORMANCE_API:
                assert doc["kind"] in ("Step", "WebhookRequest"), file
                if doc["kind"] == "Step":
                    assert set(doc) - {"apiVersion", "kind"} <= {"settle", "sleep", "patch", "delete"}, file
                else:
                    assert {"path", "requestKind", "resource", "object"} <= set(doc), file
            else:
                assert doc.get("metadata", {}).get("name"), f"{file}: every object is named"


class _LaggingKube:
    """A cluster whose manager's webhook denies TrainJobs on a new runtime for ``lag`` dry runs
    (a stand-in for the Go manager's informer cache catching up), recording every request."""

    def __init__(self, lag: int) -> None:
        self.lag = lag
        self.requests: list[tuple[str, str]] = []

    async def list(self, api_version: str, kind: str, namespace: str | None) -> list[dict[str, object]]:
        return []

    async def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        return kind.lower() + "s", kind != "ClusterTrainingRuntime"

    async def collection_path(self, api_version: str, kind: str, namespace: str | None) -> str:
        return f"/apis/{api_version}/namespaces/{namespace}/{kind.lower()}s"

    async def create(self, obj: dict[str, object], namespace: str | None) -> tuple[int, object]:
        self.requests.append(("create", str(obj["kind"])))
        return 201, obj

    async def request(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        self.requests.append((method, path))
        if self.lag > 0:
            self.lag -= 1
            message = (
                'admission webhook "validate.trainjob.trainer.kubeflow.org" denied the request: '
                'spec.RuntimeRef: Invalid value: ...: ClusterTrainingRuntime.trainer.kubeflow.org "rt" '
                "not found: specified clusterTrainingRuntime must be created before the TrainJob is created"
            )
            return 403, {"message": message}
        return 201, body


def _scenario(tmp_path: Path, text: str) -> Scenario:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return Scenario(path, "c-ns", Settings(quiet_seconds=0.0, max_seconds=1.0, poll_seconds=0.0))


_RUNTIME_THEN_TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: rt}
spec: {template: {spec: {replicatedJobs: []}}}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: tj}
spec: {runtimeRef: {name: rt}}
"""


async def test_a_trainjob_on_a_runtime_just_created_waits_until_the_webhook_finds_it(tmp_path: Path) -> None:
    kube = _LaggingKube(lag=2)
    scenario = _scenario(tmp_path, _RUNTIME_THEN_TRAINJOB)

    out = await scenario.run(Side("go", kube))  # type: ignore[arg-type]

    dry_runs = [path for method, path in kube.requests if method == "POST"]
    assert dry_runs == ["/apis/trainer.kubeflow.org/v1alpha1/namespaces/c-ns/trainjobs?dryRun=All"] * 3
    assert kube.requests[-1] == ("create", "TrainJob")  # created only after the third probe passed
    assert out.records["answer/1/create TrainJob/tj"] == {"allowed": True, "code": 201, "message": ""}


async def test_a_trainjob_on_a_runtime_the_scenario_did_not_create_is_not_held_back(tmp_path: Path) -> None:
    kube = _LaggingKube(lag=5)
    scenario = _scenario(tmp_path, _RUNTIME_THEN_TRAINJOB.split("---", 1)[1])

    await scenario.run(Side("go", kube))  # type: ignore[arg-type]

    assert [m for m, _ in kube.requests if m == "POST"] == []  # a negative scenario keeps its denial
