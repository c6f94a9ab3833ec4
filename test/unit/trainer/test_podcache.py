"""The Pod cache policy: which Pods are kept whole, what is kept of the others, and
that every Pod reader still gets what it reads."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from manager.cache.informer import SharedInformer
from manager.client import Client
from manager.client.restmapper import NoKindMatch, RESTMapping
from manager.scheme import GroupVersionKind
from trainer.api import jobset_constants as jc
from trainer.api import scheduling_constants as sc
from trainer.api.config_v1alpha1 import ConfigurationError, load
from trainer.controllers import podcache
from trainer.controllers.elasticquota import compute_used
from trainer.controllers.podgroup import index_pod_group
from trainer.jobset.placement import pod_job_key_index, pod_name_index

Object = dict[str, Any]


def rich_pod(name: str = "web-7d9f-abcde", labels: dict[str, str] | None = None) -> Object:
    """A Deployment's Pod as the API server returns it (what the cache sees)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": "u-1",
            "resourceVersion": "42",
            "generateName": "web-7d9f-",
            "labels": labels if labels is not None else {"app": "web", "pod-template-hash": "7d9f"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "x"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "r"}
            ],
            "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {
            "nodeName": "kwok-node-1",
            "overhead": {"cpu": "250m"},
            "initContainers": [
                {
                    "name": "init",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                },
                {
                    "name": "sidecar",
                    "image": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}},
                },
            ],
            "containers": [
                {
                    "name": "app",
                    "image": "nginx",
                    "env": [{"name": "A", "value": "B"}],
                    "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1"}},
                },
                {"name": "log", "image": "fluent", "resources": {"requests": {"cpu": "100m"}}},
            ],
            "volumes": [{"name": "v", "emptyDir": {}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "ready": True}],
        },
    }


QUOTA = {
    "metadata": {"name": "q", "namespace": "team"},
    "spec": {"min": {"cpu": "1", "memory": "1Gi"}, "max": {"cpu": "10", "memory": "10Gi", "pods": "5"}},
}


def test_unrelated_pod_keeps_exactly_what_the_elasticquota_sum_reads() -> None:
    full = rich_pod()
    slim = podcache.minimal_transform(copy.deepcopy(full))
    assert compute_used(QUOTA, [slim]) == compute_used(QUOTA, [full])
    assert slim["status"]["phase"] == "Running"  # what tells the quota's observer it counts
    assert slim["metadata"] == {
        "name": full["metadata"]["name"],
        "namespace": "team",
        "uid": "u-1",
        "resourceVersion": "42",
    }
    assert slim["spec"] == {"containers": [{"resources": {"requests": {"cpu": "2250m", "memory": "1Gi"}}}]}
    assert slim["status"] == {"phase": "Running"}
    # the indexes of the other readers find nothing in it, as in the whole Pod
    for index in (index_pod_group, pod_job_key_index, pod_name_index):
        assert index(slim) == index(full) == []


def test_deleting_state_survives_the_projection() -> None:
    full = rich_pod()
    full["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert podcache.slim_pod(full)["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize("label", [jc.JobSetNameKey, sc.PodGroupLabel])
def test_pods_of_jobsets_and_pod_groups_are_kept_whole(label: str) -> None:
    full = rich_pod("js-node-0-0-xyz", {label: "train", jc.JobKey: "k"})
    full["metadata"]["annotations"][jc.ExclusiveKey] = "zone"
    kept = podcache.minimal_transform(copy.deepcopy(full))
    assert "managedFields" not in kept["metadata"]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in kept["metadata"]["annotations"]
    expected = copy.deepcopy(full)
    del expected["metadata"]["managedFields"]
    del expected["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert kept == expected


def test_modes_choose_label_selection_or_projection() -> None:
    assert podcache.by_object("Full", all_pods=True, pod_groups=True) is None
    selected = podcache.by_object("Minimal", all_pods=False, pod_groups=True)
    assert selected is not None and selected.compact
    assert selected.label_selectors == [jc.JobSetNameKey, sc.PodGroupLabel]
    only_jobsets = podcache.by_object("Minimal", all_pods=False, pod_groups=False)
    assert only_jobsets is not None and only_jobsets.label_selectors == [jc.JobSetNameKey]
    everything = podcache.by_object("Minimal", all_pods=True, pod_groups=True)
    assert everything is not None and everything.label_selectors is None and everything.compact
    assert everything.transform is podcache.minimal_transform
    with pytest.raises(ValueError, match="podCache"):
        podcache.by_object("Tiny", all_pods=False, pod_groups=False)


class FakeMapper:
    def __init__(self, served: set[str]) -> None:
        self.served = served

    async def mapping(self, gvk: GroupVersionKind) -> RESTMapping:
        if gvk.kind not in self.served:
            raise NoKindMatch(gvk)
        return RESTMapping(gvk, gvk.kind.lower() + "s", True)


class FakeManager:
    def __init__(self, served: set[str]) -> None:
        from manager.cache.cache import Cache

        self.client = Client(None, FakeMapper(served | {"Pod"}))  # type: ignore[arg-type]
        self.cache = Cache(self.client)


@pytest.mark.parametrize(
    ("served", "components", "mode", "chosen", "selectors"),
    [
        ({"PodGroup", "ElasticQuota"}, ["jobset", "scheduling", "trainer"], None, "Minimal/all-pods", [None]),
        (
            {"PodGroup"},
            ["jobset", "scheduling", "trainer"],
            None,
            "Minimal/label-selected",
            [jc.JobSetNameKey, sc.PodGroupLabel],
        ),
        (
            {"PodGroup", "ElasticQuota"},
            ["jobset", "trainer"],
            None,
            "Minimal/label-selected",
            [jc.JobSetNameKey],
        ),
        ({"PodGroup", "ElasticQuota"}, ["jobset", "scheduling", "trainer"], "Full", "Full", [None]),
    ],
)
async def test_configure_follows_what_runs(
    served: set[str], components: list[str], mode: str | None, chosen: str, selectors: list[str | None]
) -> None:
    mgr = FakeManager(served)
    assert await podcache.configure(mgr, mode, components) == chosen
    informer: SharedInformer = await mgr.cache.get_informer(podcache.POD)
    assert [r.options.label_selector for r in informer.reflectors] == selectors
    assert informer.store.compact is (mode != "Full")


def test_configuration_switch_is_validated() -> None:
    assert load({"podCache": "Full"}).pod_cache == "Full"
    assert load(None).pod_cache is None  # Minimal
    with pytest.raises(ConfigurationError, match='podCache: Unsupported value: "tiny"'):
        load({"podCache": "tiny"})


# -- the projection keeps every ElasticQuota sum (property) ------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from manager.meta.quantity import QuantityError  # noqa: E402
from trainer.controllers.elasticquota import used_patch  # noqa: E402

RESOURCE_NAMES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "ephemeral-storage"])
QUANTITY_TEXT = st.one_of(
    st.sampled_from(["0", "1", "100m", "250m", "2", "1.5", "1e3", "+1", "128Mi", "1Gi", "1G", "500Ki"]),
    st.builds(
        lambda n, suffix: f"{n}{suffix}",
        st.integers(0, 5000),
        st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "n", "u", "e2", "E-3"]),
    ),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 99), st.integers(0, 999)),
)
REQUESTS = st.dictionaries(RESOURCE_NAMES, QUANTITY_TEXT, max_size=4)


def _container(requests: Any, shape: int, sidecar: bool) -> Object:
    container: Object = {"name": "c", "image": "i"}
    if shape == 0:
        container["resources"] = {"requests": requests, "limits": {"cpu": "9"}}
    elif shape == 1:
        container["resources"] = {"requests": None}
    elif shape == 2:
        container["resources"] = {}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


CONTAINERS = st.lists(
    st.builds(_container, REQUESTS, st.integers(0, 3), st.booleans()),
    max_size=3,
)


@st.composite
def pods(draw: st.DrawFn, invalid: bool = False) -> Object:
    pod = rich_pod(f"p-{draw(st.integers(0, 10**6))}")
    pod["spec"]["containers"] = draw(CONTAINERS)
    init = draw(CONTAINERS)
    if init:
        pod["spec"]["initContainers"] = init
    else:
        del pod["spec"]["initContainers"]
    overhead = draw(st.one_of(st.none(), REQUESTS))
    if overhead is None:
        del pod["spec"]["overhead"]
    else:
        pod["spec"]["overhead"] = overhead
    pod["status"]["phase"] = draw(st.sampled_from(["Running", "Running", "Pending", "Succeeded", "Failed"]))
    if invalid and pod["spec"]["containers"] and draw(st.booleans()):
        pod["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": draw(st.sampled_from(["x", "1.2.3", ""]))}
        }
    return pod


QUOTAS = st.builds(
    lambda mn, mx: {"metadata": {"name": "q", "namespace": "team"}, "spec": {"min": mn, "max": mx}},
    REQUESTS,
    REQUESTS,
)


def _outcome(eq: Object, namespace_pods: list[Object]) -> Any:
    """What a user sees of a reconcile: the patch body (every value's text), or the error."""
    try:
        used = compute_used(eq, namespace_pods)
    except QuantityError as err:
        return ("error", str(err))
    # the text of every value, and its format: a later sum starting from it takes that format
    return used_patch(eq, used), {name: q.format for name, q in used.items()}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(QUOTAS, st.lists(pods(invalid=True), max_size=6))
def test_projected_pods_give_every_elasticquota_sum_unchanged(eq: Object, originals: list[Object]) -> None:
    projected = [podcache.minimal_transform(copy.deepcopy(pod)) for pod in originals]
    assert _outcome(eq, projected) == _outcome(eq, originals)
    for slim, pod in zip(projected, originals, strict=True):
        assert (slim.get("status") or {}).get("phase") == (pod.get("status") or {}).get("phase")
        assert slim["metadata"]["name"] == pod["metadata"]["name"]
        assert slim["metadata"]["uid"] == pod["metadata"]["uid"]
        assert slim["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
        assert "labels" not in slim["metadata"]


def test_a_pod_is_projected_to_one_container_carrying_its_effective_requests() -> None:
    # containers 500m+100m cpu, 256Mi; init max(2, 100m sidecar) cpu, 1Gi; overhead 250m
    slim = podcache.minimal_transform(rich_pod())
    assert slim["spec"] == {"containers": [{"resources": {"requests": {"cpu": "2250m", "memory": "1Gi"}}}]}
    assert set(slim) == {"apiVersion", "kind", "metadata", "spec", "status"}


def test_a_pod_without_requests_has_an_empty_spec() -> None:
    pod = rich_pod()
    pod["spec"] = {"containers": [{"name": "a", "image": "b"}]}
    assert podcache.minimal_transform(pod)["spec"] == {}


def test_sums_that_would_change_format_keep_the_request_fields() -> None:
    pod = rich_pod()
    pod["spec"] = {
        "containers": [
            {"name": "a", "resources": {"requests": {"memory": "128Mi"}}},
            {"name": "b", "resources": {"requests": {"memory": "1G"}}},
        ]
    }
    slim = podcache.minimal_transform(copy.deepcopy(pod))
    # 128Mi + 1G prints as 1134217728, which reads back as a decimal quantity: kept as it is
    assert slim["spec"]["containers"] == [
        {"resources": {"requests": {"memory": "128Mi"}}},
        {"resources": {"requests": {"memory": "1G"}}},
    ]
    assert _outcome(QUOTA, [slim, rich_pod()]) == _outcome(QUOTA, [pod, rich_pod()])


def test_an_unparsable_request_is_kept_so_the_controller_still_reports_it() -> None:
    pod = rich_pod()
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    slim = podcache.minimal_transform(copy.deepcopy(pod))
    assert slim["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "lots"
    assert _outcome(QUOTA, [slim])[0] == "error"
    assert _outcome(QUOTA, [slim]) == _outcome(QUOTA, [pod])
