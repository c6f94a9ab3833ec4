"""JobSet v0.12.0's webhooks decode with a sigs.k8s.io/json that names the embedded struct fields in
a type error's path (``VolumeSource``, ``ProbeHandler``); jobset v0.10.1's does not. The texts are
the Go jobset v0.12.0 binary's answers (conformance ``v2.3/jobset-direct-embedded.yaml``)."""

from __future__ import annotations

from typing import Any

import pytest

from manager.webhook import DecodeError
from trainer.api import gocodec
from webhooks import typed

Json = dict[str, Any]


def jobset_with_volume(volume: Json) -> Json:
    pod = {"volumes": [volume], "containers": [{"name": "c", "image": "b"}]}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "x"},
        "spec": {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": {"spec": pod}}}}]},
    }


def refusal(api_version: str, kind: str, obj: Json, types_file: str) -> str:
    with pytest.raises(DecodeError) as err:
        typed.decoder(api_version, kind, types_file=types_file)(obj)
    return str(err.value)


def test_v0_12_names_the_embedded_volume_source() -> None:
    obj = jobset_with_volume({"name": "v", "emptyDir": []})
    assert refusal("jobset.x-k8s.io/v1alpha2", "JobSet", obj, gocodec.JOBSET_V0_12_TYPES_FILE) == (
        "json: cannot unmarshal array into Go struct field Volume.spec.replicatedJobs.template.spec.template.spec."
        "volumes.VolumeSource.emptyDir of type v1.EmptyDirVolumeSource"
    )
    assert refusal("jobset.x-k8s.io/v1alpha2", "JobSet", obj, gocodec.TYPES_FILE) == (
        "json: cannot unmarshal array into Go struct field Volume.spec.replicatedJobs.template.spec.template.spec."
        "volumes.emptyDir of type v1.EmptyDirVolumeSource"
    )


def test_v0_12_pod_webhooks_name_the_embedded_probe_handler() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "b", "livenessProbe": {"exec": "sleep"}}]},
    }
    assert refusal("v1", "Pod", pod, gocodec.JOBSET_V0_12_TYPES_FILE) == (
        "json: cannot unmarshal string into Go struct field Probe.spec.containers.livenessProbe.ProbeHandler.exec "
        "of type v1.ExecAction"
    )
