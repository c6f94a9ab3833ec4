"""The conformance runner's own logic: normalisation, the diff, listed divergences, scenarios."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from manager.envtest.kwokstages import RUN_SECONDS_ANNOTATION
from trainer.conformance.cli import DEFAULT_SCENARIOS, KUEUE_SCENARIOS, report
from trainer.conformance.diff import (
    MISSING,
    Difference,
    classify,
    compare,
    load_divergences,
)
from trainer.conformance.harness import PodTiming, Side
from trainer.conformance.normalize import Normaliser
from trainer.conformance.runner import (
    CONFORMANCE_API,
    STEP_FIELDS,
    Outcome,
    Scenario,
    ScenarioResult,
    Settings,
    _apply_json_patch,
    load_scenario,
    merge_patch,
    orphans_due,
    running_pods_due,
    scenario_files,
    scenario_levels,
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


def _workload(name: str, owner: str) -> dict[str, object]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "generation": 3,
            "ownerReferences": [{"kind": "TrainJob", "name": owner, "uid": "u"}],
        },
        "status": {"accumulatedPastExecutionTimeSeconds": 22, "conditions": []},
    }


def _event(kind: str, name: str, reason: str, message: str) -> dict[str, object]:
    return {
        "involvedObject": {"kind": kind, "name": name},
        "reason": reason,
        "type": "Warning" if reason in ("Pending", "TrainJobResourcesCreationFailed") else "Normal",
        "message": message,
        "source": {"component": "kueue-admission"},
    }


def test_kueue_workload_names_seconds_and_timing_are_normalised() -> None:
    norm = Normaliser("c-k-1", kueue=True)
    workloads = norm.objects("Workload", [_workload("trainjob-a-1f2e3", "a")])
    wl = workloads["Workload/trainjob-a-<hash>"]
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] == "<seconds>"
    assert "generation" not in wl["metadata"]  # how often two writers wrote it: timing
    race = 'admission webhook "mjobset.kb.io" denied the request: TrainJob.trainer.kubeflow.org "c" not found'
    events = norm.events(
        [
            _event(
                "Workload",
                "trainjob-a-1f2e3",
                "QuotaReserved",
                "Quota reserved in ClusterQueue cq, wait time since queued was 3s",
            ),
            _event("Workload", "trainjob-a-1f2e3", "Pending", "couldn't assign flavors ... 2 more needed"),
            _event(
                "TrainJob",
                "c",
                "TrainJobResourcesCreationFailed",
                f"TrainJob resources reconciliation failed: {race}",
            ),
            _event(
                "TrainJob",
                "c",
                "TrainJobResourcesCreationFailed",
                "TrainJob resources reconciliation failed: other",
            ),
            _event(
                "JobSet",
                "b",
                "JobCreationFailed",
                'job "b-node-0" creation failed with error: admission webhook "mjob.kb.io" denied the '
                'request: JobSet.jobset.x-k8s.io "b" not found',
            ),
        ]
    )
    assert sorted(events) == [
        "Event/TrainJob/c/TrainJobResourcesCreationFailed",
        "Event/Workload/trainjob-a-<hash>/QuotaReserved",
    ]
    assert events["Event/Workload/trainjob-a-<hash>/QuotaReserved"]["message"] == (
        "Quota reserved in ClusterQueue cq, wait time since queued was <seconds>"
    )
    # without Kueue in front, generations and every event are compared as they are
    plain = Normaliser("c-k-1")
    assert (
        plain.objects("Workload", [_workload("trainjob-a-1f2e3", "a")])["Workload/trainjob-a-<hash>"][
            "metadata"
        ]["generation"]
        == 3
    )
    assert len(plain.events([_event("Workload", "w", "Pending", "x")])) == 1


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


def test_a_one_sided_divergence_excuses_only_the_side_it_names(tmp_path: Path) -> None:
    listed = tmp_path / "d.yaml"
    listed.write_text(
        "divergences:\n- {id: T-16, where: 's: */Event/TrainJob/*/Failed .', ours: '<absent>'}\n"
    )
    theirs_only = Difference("s", "final/Event/TrainJob/a/Failed", "", MISSING, "<present>")
    ours_only = Difference("s", "final/Event/TrainJob/b/Failed", "", "<present>", MISSING)
    unlisted, excused = classify([theirs_only, ours_only], load_divergences(listed))
    assert [(d.key, i) for d, i in excused] == [("final/Event/TrainJob/a/Failed", "T-16")]
    assert unlisted == [ours_only]


def test_the_listed_torchtune_race_excuses_only_an_event_ours_lacks() -> None:
    """T-16 as divergences.yaml lists it: the Go side's spurious event, never one of ours."""
    where = "final/Event/TrainJob/tune-qwen/TrainJobResourcesCreationFailed"
    theirs_only = Difference("shipped-torchtune-cache", where, "", MISSING, "<present>")
    ours_only = Difference("shipped-torchtune-cache", where, "", "<present>", MISSING)
    elsewhere = Difference("other", where, "", MISSING, "<present>")
    unlisted, excused = classify([theirs_only, ours_only, elsewhere], load_divergences())
    assert [(d, i) for d, i in excused] == [(theirs_only, "T-16")]
    assert unlisted == [ours_only, elsewhere]


@pytest.mark.parametrize(
    ("scenario", "where"),
    [
        # the Go jobset's Warning when its cache lags behind its own Service create (the reduced
        # v2.1 set, jobset-failure-rules)
        ("jobset-failure-rules", "final/Event/JobSet/fail-on-deadline/HeadlessServiceCreationFailed"),
        # jobset v0.12.0 records its own cache-lag AlreadyExists on a Job create too (the reduced
        # v2.3 set's deadline scenario, in one CI run)
        ("deadline", "settle-2/Event/JobSet/runs-over/JobCreationFailed"),
    ],
)
def test_the_listed_headless_service_race_excuses_only_an_event_ours_lacks(scenario: str, where: str) -> None:
    """J-1 as divergences.yaml lists it: an event of the Go jobset's cache lag, never one of ours."""
    theirs_only = Difference(scenario, where, "", MISSING, "<present>")
    ours_only = Difference(scenario, where, "", "<present>", MISSING)
    unlisted, excused = classify([theirs_only, ours_only], load_divergences())
    assert [(d, i) for d, i in excused] == [(theirs_only, "J-1")]
    assert unlisted == [ours_only]


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
    files = sorted(DEFAULT_SCENARIOS.rglob("*.yaml"))
    assert len(files) >= 30
    files += sorted(KUEUE_SCENARIOS.glob("*.yaml"))  # conformance --kueue
    for file in files:
        docs = load_scenario(file)
        assert docs, file
        assert scenario_levels(file), f"{file}: names its levels (header or folder)"
        for doc in docs:
            assert doc.get("apiVersion") and doc.get("kind"), f"{file}: {doc}"
            if doc["apiVersion"] == CONFORMANCE_API:
                assert doc["kind"] in ("Step", "WebhookRequest", "StatusRequest"), file
                if doc["kind"] == "Step":
                    assert set(doc) - {"apiVersion", "kind"} <= set(STEP_FIELDS), file
                    assert doc.get("settle") in (None, True, "running"), file
                    if "update" in doc:
                        assert {"apiVersion", "kind", "name", "merge"} <= set(doc["update"]), file
                    if "wait" in doc:
                        assert {"apiVersion", "kind", "name", "condition"} <= set(doc["wait"]), file
                elif doc["kind"] == "StatusRequest":
                    fields = {"name", "trainJob", "token", "body", "rawBody", "padTo", "path", "scheme"}
                    assert "trainJob" in doc and set(doc) - {"apiVersion", "kind"} <= fields, file
                else:
                    assert {"path", "requestKind", "resource", "object"} <= set(doc), file
            else:
                assert doc.get("metadata", {}).get("name"), f"{file}: every object is named"


def test_scenario_names_are_unique_across_levels() -> None:
    # The namespace and the divergence patterns go by the file's stem.
    stems = [f.stem for f in [*DEFAULT_SCENARIOS.rglob("*.yaml"), *KUEUE_SCENARIOS.glob("*.yaml")]]
    assert len(stems) == len(set(stems))


def test_a_scenario_belongs_to_its_header_levels_else_its_folder_else_every_level(tmp_path: Path) -> None:
    both = tmp_path / "both.yaml"
    both.write_text("# levels: v2.1, v2.3\n# what it does\napiVersion: v1\nkind: ConfigMap\n")
    (tmp_path / "v2.3").mkdir()
    folder = tmp_path / "v2.3" / "new.yaml"
    folder.write_text("# no header\napiVersion: v1\nkind: ConfigMap\n")
    anywhere = tmp_path / "mine.yaml"
    anywhere.write_text(
        "apiVersion: v1\nkind: ConfigMap\n# levels: v2.3 (not a header: after a document line)\n"
    )
    assert scenario_levels(both) == {"v2.1", "v2.3"}
    assert scenario_levels(folder) == {"v2.3"}
    assert scenario_levels(anywhere) is None
    assert scenario_files([tmp_path], "v2.1") == [both, anywhere]
    assert scenario_files([tmp_path], "v2.3") == [both, anywhere, folder]
    assert scenario_files([tmp_path]) == [both, anywhere, folder]
    bad = tmp_path / "bad.yaml"
    bad.write_text("# levels: v9\n")
    with pytest.raises(ValueError, match="unknown API level"):
        scenario_levels(bad)


def test_the_shipped_scenarios_split_by_level() -> None:
    v21 = {f.stem for f in scenario_files([DEFAULT_SCENARIOS], "v2.1")}
    v23 = {f.stem for f in scenario_files([DEFAULT_SCENARIOS], "v2.3")}
    assert "trainjob-torch-auto" in v21 and "trainjob-torch-auto" not in v23  # v2.1 fields
    assert "jobset-success-all" in v21 & v23  # JobSet only: both levels
    assert "patches-two-managers" in v23 and "patches-two-managers" not in v21


def test_merge_patch_is_rfc_7386() -> None:
    target = {"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]}
    assert merge_patch(target, {"b": {"c": None, "e": 4}, "l": [3], "a": None}) == {
        "b": {"d": 3, "e": 4},
        "l": [3],
    }
    assert target == {"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]}


def _pod(phase: str, start: str | None, **meta: object) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "ownerReferences": [{"kind": "Job", "name": "j", "uid": "j-uid"}], **meta},
        "status": {"phase": phase, **({"startTime": start} if start else {})},
    }


def test_running_job_pods_are_due_at_their_start_plus_their_run_time() -> None:
    side = Side("ours", None, pod_timing=PodTiming(2.0))  # type: ignore[arg-type]
    long = {"annotations": {RUN_SECONDS_ANNOTATION: "45"}}
    pods = [
        _pod("Running", "2026-12-01T10:00:00Z"),
        _pod("Running", "2026-12-01T10:00:00Z", **long),
        _pod("Pending", None),
        _pod("Succeeded", "2026-12-01T10:00:00Z"),
        _pod("Running", "2026-12-01T10:00:00Z", deletionTimestamp="2026-12-01T10:00:01Z"),
        {"metadata": {"name": "bare"}, "status": {"phase": "Running", "startTime": "2026-12-01T10:00:00Z"}},
    ]
    start = datetime.datetime(2026, 12, 1, 10, tzinfo=datetime.UTC).timestamp()
    assert running_pods_due(side, pods) == [start + 2.0, start + 45.0]
    assert running_pods_due(Side("attached", None), pods) == []  # type: ignore[arg-type]


class _PodsKube:
    """A cluster whose one Job pod is Running until ``polls`` lists have been served."""

    def __init__(self, polls: int) -> None:
        self.polls = polls
        self.requests: list[tuple[str, object]] = []

    async def list(self, api_version: str, kind: str, namespace: str | None) -> list[dict[str, object]]:
        if kind == "Job":
            return [{"metadata": {"name": "j", "uid": "j-uid"}}]
        if kind != "Pod":
            return []
        self.polls -= 1
        phase = "Running" if self.polls > 0 else "Succeeded"
        started = datetime.datetime.now(datetime.UTC).isoformat()
        return [_pod(phase, started, **{"annotations": {RUN_SECONDS_ANNOTATION: "600"}})]

    async def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        return kind.lower() + "s", True

    async def create(self, obj: dict[str, object], namespace: str | None) -> tuple[int, object]:
        return 201, obj

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None) -> tuple[int, object]:
        self.requests.append(("get", name))
        return 200, {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": name, "labels": {"a": "1"}},
        }

    async def replace(self, obj: dict[str, object], namespace: str | None) -> tuple[int, object]:
        self.requests.append(("put", obj))
        if len([r for r in self.requests if r[0] == "put"]) == 1:
            return 409, {"message": "the object has been modified"}
        return 200, obj


async def test_a_settle_waits_for_running_pods_unless_it_settles_running(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    side = Side("ours", _PodsKube(polls=4), pod_timing=PodTiming(2.0))  # type: ignore[arg-type]
    out = Outcome()
    norm = Normaliser("c-ns")
    await scenario._settle(side, norm, out, "settle-1")
    assert out.records["settle-1/Pod/p"]["status"]["phase"] == "Succeeded"  # waited (a 600 s pod)
    assert not out.unsettled
    side = Side("ours", _PodsKube(polls=4), pod_timing=PodTiming(2.0))  # type: ignore[arg-type]
    await scenario._settle(side, norm, out, "settle-2", running=True)
    assert out.records["settle-2/Pod/p"]["status"]["phase"] == "Running"


class _CollectedLateKube(_PodsKube):
    """A cluster where the JobSet ``high`` is gone and the garbage collector deletes its Workload
    only after ``polls`` lists of Workloads (a loaded kube-controller-manager)."""

    async def list(self, api_version: str, kind: str, namespace: str | None) -> list[dict[str, object]]:
        if kind != "Workload":
            return []
        self.polls -= 1
        if self.polls <= 0:
            return []
        owner = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "high",
            "uid": "high-uid",
        }
        return [{"metadata": {"name": "jobset-high-1a2b3", "uid": "w", "ownerReferences": [owner]}}]


def test_objects_whose_owner_is_gone_are_counted_as_due_for_the_garbage_collector() -> None:
    owned = {"metadata": {"uid": "p", "ownerReferences": [{"kind": "Job", "uid": "j"}]}}
    by_node = {"metadata": {"uid": "q", "ownerReferences": [{"kind": "Node", "uid": "n"}]}}
    assert orphans_due({"Pod": [owned, by_node], "Job": [{"metadata": {"uid": "j"}}]}) == 0
    assert orphans_due({"Pod": [owned, by_node], "Job": []}) == 1  # the Job deleted, its pod not yet
    assert orphans_due({"Pod": [owned, by_node]}) == 0  # Jobs not listed here: not judged


async def test_a_settle_waits_for_the_garbage_collector_where_one_runs(tmp_path: Path) -> None:
    """conformance --kueue at v2.1: the Go side's Workload of a deleted JobSet still there when
    its 4 quiet seconds ended (the garbage collector behind on a loaded machine), compared as a
    difference. A snapshot with an object whose owner is gone is not a settled state."""
    scenario = _scenario(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    norm = Normaliser("c-ns")
    out = Outcome()
    side = Side("theirs", _CollectedLateKube(polls=30))  # type: ignore[arg-type]
    await scenario._settle(side, norm, out, "settle-1", running=True)
    assert not [k for k in out.records if k.startswith("settle-1/Workload/")]  # waited for the collector
    assert not out.unsettled
    # a local cluster without kube-controller-manager (--nodes 0) has no collector: nothing to wait for
    without = Side("theirs", _CollectedLateKube(polls=30), env=SimpleNamespace(full=False))  # type: ignore[arg-type]
    await scenario._settle(without, norm, out, "settle-2", running=True)
    assert [k for k in out.records if k.startswith("settle-2/Workload/")]


async def test_an_update_step_puts_the_merged_object_and_retries_a_conflict(tmp_path: Path) -> None:
    kube = _PodsKube(polls=0)
    scenario = _scenario(
        tmp_path,
        "apiVersion: conformance.trainer.kubeflow.org/v1alpha1\nkind: Step\n"
        "update: {apiVersion: v1, kind: ConfigMap, name: c, merge: {metadata: {labels: {b: '2'}}}}\n",
    )
    out = await scenario.run(Side("ours", kube))  # type: ignore[arg-type]
    puts = [body for what, body in kube.requests if what == "put"]
    assert len(puts) == 2 and [what for what, _ in kube.requests].count("get") == 2
    assert puts[-1]["metadata"]["labels"] == {"a": "1", "b": "2"}  # type: ignore[index]
    assert out.records["answer/0/update ConfigMap/c"] == {"allowed": True, "code": 200, "message": ""}


class _QueueKube(_PodsKube):
    """A cluster whose ClusterQueue turns Active on the ``active_after``-th read."""

    def __init__(self, active_after: int) -> None:
        super().__init__(polls=0)
        self.active_after = active_after
        self.reads = 0

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None) -> tuple[int, object]:
        self.reads += 1
        status = "True" if self.reads >= self.active_after else "False"
        return 200, {
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Active", "status": status}]},
        }


_WAIT = (
    "apiVersion: conformance.trainer.kubeflow.org/v1alpha1\nkind: Step\n"
    "wait: {apiVersion: kueue.x-k8s.io/v1beta2, kind: ClusterQueue, name: cq, condition: Active, timeout: 0.5}\n"
)


async def test_a_wait_step_polls_until_the_condition_and_records_only_a_timeout(tmp_path: Path) -> None:
    kube = _QueueKube(active_after=3)
    out = await _scenario(tmp_path, _WAIT).run(Side("ours", kube))  # type: ignore[arg-type]
    assert kube.reads == 3 and not [k for k in out.records if k.startswith("wait/")]
    never = _QueueKube(active_after=10**9)
    out = await _scenario(tmp_path, _WAIT).run(Side("ours", never))  # type: ignore[arg-type]
    assert out.records["wait/0/ClusterQueue/cq"] == {"timedOut": "Active never True"}


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
