"""The v2.3 TrainJob defaulter (webhooks/trainjob_defaulter.py, docs/behaviour/trainer.md §12.4):
upstream v2.3.0's ``TestDefault`` cases and the AdmissionReview answers."""

from __future__ import annotations

import base64
import copy
import datetime
from pathlib import Path
from typing import Any

from manager.testing.fake import FakeClient
from manager.webhook import AdmissionRequest
from manager.webhook.jsonpatch import apply as apply_patch
from trainer.components import component
from trainer.runtime.context import SetupContext
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from webhooks import setup_trainer
from webhooks.certs import MWC_GVK, VWC_GVK, CertConfig, CertRotator
from webhooks.trainjob_defaulter import PATH, default_runtime_patches, handler

Json = dict[str, Any]
NOW = datetime.datetime(2025, 6, 15, 12, 0, 0, 123456, tzinfo=datetime.UTC)
STAMP = "2025-06-15T12:00:00Z"  # metav1.Time: UTC, whole seconds
OLD = "2025-01-01T00:00:00Z"


def sa_patch(manager: str, service_account: str, time: str | None = None) -> Json:
    patch: Json = {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {"template": {"spec": {"serviceAccountName": service_account}}}
                            },
                        }
                    ]
                }
            }
        },
    }
    if time is not None:
        patch["time"] = time
    return patch


def tj(*patches: Json, **spec: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "test", "namespace": "default"},
        "spec": {
            "runtimeRef": {"name": "test-runtime", "kind": "ClusterTrainingRuntime"},
            "runtimePatches": list(patches),
            **spec,
        },
    }


def times(obj: Json) -> list[str | None]:
    return [p.get("time") for p in obj["spec"]["runtimePatches"]]


def test_create_every_patch_without_a_time_gets_now() -> None:
    new = tj({"manager": "acme.io/one"}, {"manager": "acme.io/two"})
    assert default_runtime_patches(new, None, NOW) is True
    assert times(new) == [STAMP, STAMP]


def test_create_a_time_set_by_the_creator_is_kept() -> None:
    new = tj({"manager": "acme.io/one", "time": OLD}, {"manager": "acme.io/two"})
    default_runtime_patches(new, None, NOW)
    assert times(new) == [OLD, STAMP]


def test_update_an_unchanged_patch_keeps_its_time_even_when_the_request_drops_it() -> None:
    old = tj(sa_patch("acme.io/one", "sa", OLD))
    new = tj(sa_patch("acme.io/one", "sa"))
    assert default_runtime_patches(new, old, NOW) is True
    assert times(new) == [OLD]


def test_update_a_changed_patch_gets_now() -> None:
    old = tj(sa_patch("acme.io/one", "old-sa", OLD))
    new = tj(sa_patch("acme.io/one", "new-sa"))
    default_runtime_patches(new, old, NOW)
    assert times(new) == [STAMP]


def test_update_a_changed_patch_gets_now_even_with_the_old_time_in_the_request() -> None:
    old = tj({"manager": "acme.io/one", "time": OLD})
    new = tj({**sa_patch("acme.io/one", "sa"), "time": OLD})
    default_runtime_patches(new, old, NOW)
    assert times(new) == [STAMP]


def test_update_a_new_patch_beside_an_unchanged_one() -> None:
    old = tj(sa_patch("acme.io/one", "sa", OLD))
    new = tj(sa_patch("acme.io/one", "sa", OLD), {"manager": "acme.io/two"})
    default_runtime_patches(new, old, NOW)
    assert times(new) == [OLD, STAMP]


def test_update_a_time_forged_on_an_unchanged_patch_is_put_back() -> None:
    old = tj(sa_patch("acme.io/one", "sa", OLD))
    new = tj(sa_patch("acme.io/one", "sa", "2030-01-01T00:00:00Z"))
    default_runtime_patches(new, old, NOW)
    assert times(new) == [OLD]


def test_update_an_unchanged_patch_of_an_old_object_without_time_loses_the_requests_time() -> None:
    old = tj(sa_patch("acme.io/one", "sa"))
    new = tj(sa_patch("acme.io/one", "sa", OLD))
    assert default_runtime_patches(new, old, NOW) is True
    assert times(new) == [None]


def test_semantic_equality_an_empty_list_or_map_is_an_absent_one_an_empty_struct_is_not() -> None:
    old = tj({"manager": "m", "time": OLD, "trainingRuntimeSpec": {"template": {"metadata": {"labels": {}}}}})
    new = tj({"manager": "m", "trainingRuntimeSpec": {"template": {"metadata": {}}}})
    default_runtime_patches(new, old, NOW)
    assert times(new) == [OLD]
    old = tj(
        {"manager": "m", "time": OLD, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": []}}}}
    )
    new = tj({"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {}}}})
    default_runtime_patches(new, old, NOW)
    assert times(new) == [OLD]
    old = tj({"manager": "m", "time": OLD})
    new = tj({"manager": "m", "trainingRuntimeSpec": {}})  # a pointer to an empty struct
    default_runtime_patches(new, old, NOW)
    assert times(new) == [STAMP]


def test_nothing_to_stamp_is_no_change_and_times_stay_as_written() -> None:
    offset = "2025-01-01T02:00:00+02:00"
    old = tj({"manager": "m", "time": offset})
    new = tj({"manager": "m", "time": offset})
    assert default_runtime_patches(new, old, NOW) is False
    assert times(new) == [offset]
    assert default_runtime_patches(tj(), None, NOW) is False


def test_a_change_writes_every_time_as_go_does() -> None:
    new = tj({"manager": "a", "time": "2025-01-01T02:00:00.5+02:00"}, {"manager": "b"})
    default_runtime_patches(new, None, NOW)
    assert times(new) == [OLD, STAMP]


def request(operation: str, obj: Json | None, old: Json | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        kind={"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
        resource={"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
        operation=operation,
        object=obj,
        old_object=old,
    )


async def test_the_answer_is_the_json_patch_of_the_time_stamps_only() -> None:
    obj = tj({"manager": "acme.io/one"}, sa_patch("acme.io/two", "sa", OLD))
    answer = await handler(lambda: NOW)(request("CREATE", obj))
    assert answer.allowed
    assert answer.patches == [{"op": "add", "path": "/spec/runtimePatches/0/time", "value": STAMP}]
    assert times(apply_patch(copy.deepcopy(obj), answer.patches)) == [STAMP, OLD]


async def test_no_change_no_patch_and_delete_untouched() -> None:
    stamped = tj({"manager": "m", "time": OLD})
    answer = await handler(lambda: NOW)(request("UPDATE", stamped, stamped))
    assert answer.allowed and answer.patches == []
    assert (await handler(lambda: NOW)(request("DELETE", None, stamped))).allowed


async def test_an_ill_typed_time_is_answered_400_with_gos_words() -> None:
    answer = await handler(lambda: NOW)(request("CREATE", tj({"manager": "m", "time": "yesterday"})))
    assert (answer.allowed, answer.code) == (False, 400)
    assert (
        answer.message
        == 'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"'
    )
    answer = await handler(lambda: NOW)(request("CREATE", tj({"manager": "m", "time": 5})))
    assert answer.code == 400
    assert answer.message == (
        "json: cannot unmarshal number into Go struct field RuntimePatch.spec.runtimePatches.time of type string"
    )


class _Server:
    def __init__(self) -> None:
        self.paths: list[str] = []

    def register(self, path: str, handler: Any) -> None:
        self.paths.append(path)


class _Cache:
    def __init__(self) -> None:
        self.informers: list[str] = []

    async def get_informer(self, gvk: Any) -> None:
        self.informers.append(gvk.kind)


class _Manager:
    def __init__(self) -> None:
        self.cache = _Cache()

    api_reader = None
    mapper = None


async def test_only_a_level_with_a_defaulter_serves_it(monkeypatch: Any) -> None:
    async def no_runtimes(self: SetupContext) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(SetupContext, "admission_runtimes", no_runtimes)
    served = {}
    for level in (V2_1, V2_3):
        server = _Server()
        manager = _Manager()
        assert await setup_trainer(SetupContext(manager, server, level=level))  # type: ignore[arg-type]
        served[level.name] = PATH in server.paths
        # the validators' runtimes come from the cache, also where no controller asks for them
        assert manager.cache.informers == ["ClusterTrainingRuntime", "TrainingRuntime"]
    assert served == {"v2.1": False, "v2.3": True}
    assert PATH == "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"


# -- the cert rotator injects the CA into the defaulter's configuration at v2.3 -------------------


def test_the_trainer_component_declares_the_defaulters_configuration_at_v2_3_only() -> None:
    trainer = component("trainer")
    assert [str(c) for c in trainer.configurations(V2_1)] == [
        "ValidatingWebhookConfiguration/validator.trainer.kubeflow.org"
    ]
    assert [str(c) for c in trainer.configurations(V2_3)] == [
        "ValidatingWebhookConfiguration/validator.trainer.kubeflow.org",
        "MutatingWebhookConfiguration/defaulter.trainer.kubeflow.org",
    ]
    assert component("jobset").configurations(V2_3) == component("jobset").webhook_configurations


async def test_the_rotator_injects_the_ca_into_the_defaulter_at_v2_3(tmp_path: Path) -> None:
    configurations = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": [{"name": hook, "clientConfig": {}}],
        }
        for kind, name, hook in (
            ("ValidatingWebhookConfiguration", "validator.trainer.kubeflow.org", "validator.trainjob"),
            ("MutatingWebhookConfiguration", "defaulter.trainer.kubeflow.org", "defaulter.trainjob"),
        )
    ]
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "kubeflow-trainer-webhook-cert", "namespace": "kubeflow-system"},
    }
    client = FakeClient([secret, *configurations], cluster_scoped=[VWC_GVK, MWC_GVK])
    config = CertConfig(
        namespace="kubeflow-system",
        cert_dir=tmp_path,
        webhook_configurations=component("trainer").configurations(V2_3),
        write_backoff=(0.001, 3),
    )
    rotator = CertRotator(client, config, clock=lambda: NOW)
    ca_pem = await rotator.ensure_certs()
    await rotator.inject(ca_pem)
    bundle = base64.b64encode(ca_pem).decode()
    defaulter = await client.get(MWC_GVK, "defaulter.trainer.kubeflow.org")
    assert [h["clientConfig"].get("caBundle") for h in defaulter["webhooks"]] == [bundle]
