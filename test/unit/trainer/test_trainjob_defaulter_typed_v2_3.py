"""The TrainJob defaulter decodes into and re-encodes v2.3.0's typed struct
(docs/behaviour/trainer.md §12.4): what v2.3.0's TrainJob does not decode is answered 400 with
encoding/json's words before the CRD's schema is checked, and a defaulted TrainJob comes back as
``json.Marshal`` writes it (quantities canonical), as controller-runtime's defaulter answers."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from manager.webhook import AdmissionRequest
from manager.webhook.jsonpatch import apply as apply_patch
from webhooks.trainjob_defaulter import handler

Json = dict[str, Any]
NOW = datetime.datetime(2025, 6, 15, 12, 0, 0, tzinfo=datetime.UTC)
STAMP = "2025-06-15T12:00:00Z"


def tj(**spec: Any) -> Json:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "test", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def request(operation: str, obj: Json, old: Json | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        kind={"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
        resource={"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
        operation=operation,
        object=obj,
        old_object=old,
    )


def cache_patch(size: str, time: str | None = None) -> Json:
    patch: Json = {
        "manager": "example.com/volumes",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "volumes": [
                                                {
                                                    "name": "cache",
                                                    "emptyDir": {"medium": "Memory", "sizeLimit": size},
                                                }
                                            ]
                                        }
                                    }
                                }
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


def size_limit(obj: Json) -> str:
    rjob = obj["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    return str(rjob["template"]["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "auto",
            "json: cannot unmarshal string into Go struct field Trainer.spec.trainer.numProcPerNode of type int32",
        ),
        (
            2.5,
            "json: cannot unmarshal number 2.5 into Go struct field Trainer.spec.trainer.numProcPerNode of type int32",
        ),
        (
            2**31,
            "json: cannot unmarshal number 2147483648 into Go struct field Trainer.spec.trainer.numProcPerNode "
            "of type int32",
        ),
    ],
)
async def test_num_proc_per_node_is_an_int32_at_v2_3(value: Any, message: str) -> None:
    answer = await handler(lambda: NOW)(request("CREATE", tj(trainer={"numProcPerNode": value})))
    assert (answer.allowed, answer.code, answer.message) == (False, 400, message)


async def test_an_integer_num_proc_per_node_is_admitted_untouched() -> None:
    answer = await handler(lambda: NOW)(request("CREATE", tj(trainer={"numProcPerNode": 4})))
    assert answer.allowed and answer.patches == []


async def test_the_old_object_is_read_as_default_reads_it() -> None:
    """Trainer v2.3.0's ``Default`` reads the old object with ``json.Unmarshal``: what does not
    decode is its error, answered 403 (``admission.Denied``), not the decoder's 400; another kind
    decodes; keys match case-insensitively (found by admission fuzzing; the first three answers
    are the Go original's, ``test/conformance/scenarios/v2.3/webhook-direct-fuzzed.yaml``)."""
    new = tj(trainer={"numProcPerNode": 4}, runtimePatches=[{"manager": "example.com/a"}])
    answer = await handler(lambda: NOW)(request("UPDATE", new, tj(trainer={"numProcPerNode": "auto"})))
    assert (answer.allowed, answer.code, answer.reason, answer.message) == (
        False,
        403,
        "Forbidden",
        "json: cannot unmarshal string into Go struct field Trainer.spec.trainer.numProcPerNode of type int32",
    )
    answer = await handler(lambda: NOW)(request("UPDATE", new, None))
    assert (answer.code, answer.message) == (403, "unexpected end of JSON input")
    answer = await handler(lambda: NOW)(request("UPDATE", new, [new]))  # type: ignore[arg-type]
    assert answer.message == "json: cannot unmarshal array into Go value of type v1alpha1.TrainJob"

    kept = {"manager": "example.com/a", "time": "2026-01-02T03:04:05Z"}
    other_kind = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "spec": {"runtimePatches": [kept]},
    }
    upper_case = {"SPEC": {"runtimePatches": [kept]}}
    for old in (other_kind, upper_case):
        answer = await handler(lambda: NOW)(request("UPDATE", new, old))
        assert answer.allowed, answer
        stored = apply_patch(copy.deepcopy(new), answer.patches)
        assert stored["spec"]["runtimePatches"] == [kept], old  # unchanged: the old entry's time


async def test_other_v2_3_fields_are_typed_as_v2_3_0_types_them() -> None:
    answer = await handler(lambda: NOW)(request("CREATE", tj(activeDeadlineSeconds="5")))
    assert answer.message == (
        "json: cannot unmarshal string into Go struct field TrainJobSpec.spec.activeDeadlineSeconds of type int64"
    )
    bad_job = {
        "manager": "m",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": 3}]}}},
    }
    answer = await handler(lambda: NOW)(request("CREATE", tj(runtimePatches=[bad_job])))
    assert answer.message == (
        "json: cannot unmarshal number into Go struct field ReplicatedJobPatch.spec.runtimePatches."
        "trainingRuntimeSpec.template.spec.replicatedJobs.name of type string"
    )


async def test_a_stamped_trainjob_comes_back_with_its_quantities_canonical() -> None:
    obj = tj(
        runtimePatches=[cache_patch("1024Mi")],
        trainer={"resourcesPerNode": {"limits": {"memory": "2048Mi"}, "requests": {"cpu": "1000m"}}},
    )
    answer = await handler(lambda: NOW)(request("CREATE", obj))
    assert answer.allowed
    stored = apply_patch(copy.deepcopy(obj), answer.patches)
    assert stored["spec"]["runtimePatches"][0]["time"] == STAMP
    assert size_limit(stored) == "1Gi"
    assert stored["spec"]["trainer"]["resourcesPerNode"] == {
        "limits": {"memory": "2Gi"},
        "requests": {"cpu": "1"},
    }
    # nothing else of the object changes
    stored["spec"]["runtimePatches"][0].pop("time")
    assert stored["spec"]["runtimePatches"] == [cache_patch("1Gi")]


async def test_nothing_to_stamp_means_no_patch_even_with_a_quantity_go_would_rewrite() -> None:
    """controller-runtime answers without a patch when ``Default`` changed nothing."""
    obj = tj(runtimePatches=[cache_patch("1024Mi", time=STAMP)])
    answer = await handler(lambda: NOW)(request("UPDATE", obj, obj))
    assert answer.allowed and answer.patches == []
