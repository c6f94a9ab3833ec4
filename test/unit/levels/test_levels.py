"""The API level seam: choosing a level, telling installed CRDs apart, the start-up check."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.client.errors import BadRequest, InternalError, TooManyRequests, TransportError
from manager.testing.fake import FakeClient
from trainer import levels
from trainer.api import config_constants
from trainer.api.config_v1alpha1 import ConfigurationError, load
from trainer.levels.check import CRD_GVK, TRAINJOB_CRD, check_trainjob_crd

ROOT = Path(__file__).resolve().parents[3]
V2_1_CRD = ROOT / "config" / "crd" / "bases" / "trainer.kubeflow.org_trainjobs.yaml"


def v2_1_crd() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(V2_1_CRD.read_text())
    return crd


def v2_3_like(crd: dict[str, Any]) -> dict[str, Any]:
    """The v2.1 CRD with v2.3's spec fields instead (runtimePatches for podTemplateOverrides)."""
    out = copy.deepcopy(crd)
    spec = out["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    for removed in ("podTemplateOverrides", "labels", "annotations"):
        spec.pop(removed)
    spec["runtimePatches"] = {"type": "array", "items": {"type": "object"}}
    spec["activeDeadlineSeconds"] = {"type": "integer", "format": "int64", "minimum": 1}
    return out


def test_the_configuration_names_one_of_the_levels() -> None:
    assert tuple(levels.LEVELS) == config_constants.ApiLevels
    assert levels.get(None) is levels.DEFAULT
    assert levels.get("") is levels.DEFAULT
    assert levels.get("v2.3").trainer_version == "v2.3.0"
    assert levels.get("v2.3").jobset_version == "v0.12.0"
    assert load({"apiLevel": "v2.3"}).api_level == "v2.3"
    assert load({}).api_level is None


def test_an_unknown_level_in_the_configuration_is_refused_naming_the_field_and_the_choices() -> None:
    with pytest.raises(ConfigurationError) as err:
        load({"apiLevel": "v2.2"})
    assert str(err.value) == (
        'invalid configuration: apiLevel: Unsupported value: "v2.2": supported values: "v2.1", "v2.3"'
    )


def test_the_shipped_trainjob_crd_is_the_v2_1_levels() -> None:
    assert levels.of_trainjob_crd(v2_1_crd()) is levels.LEVELS["v2.1"]
    assert levels.of_trainjob_crd(v2_3_like(v2_1_crd())) is levels.LEVELS["v2.3"]
    assert levels.of_trainjob_crd({"spec": {"versions": []}}) is None


async def test_the_check_passes_on_the_levels_own_crd_and_when_there_is_none() -> None:
    await check_trainjob_crd(FakeClient([v2_1_crd()], cluster_scoped=[CRD_GVK]), levels.LEVELS["v2.1"])
    await check_trainjob_crd(
        FakeClient([v2_3_like(v2_1_crd())], cluster_scoped=[CRD_GVK]), levels.LEVELS["v2.3"]
    )
    await check_trainjob_crd(FakeClient([], cluster_scoped=[CRD_GVK]), levels.LEVELS["v2.3"])


async def test_the_check_refuses_the_other_levels_crd_in_one_line_naming_both() -> None:
    client = FakeClient([v2_1_crd()], cluster_scoped=[CRD_GVK])
    with pytest.raises(levels.CrdLevelMismatch) as err:
        await check_trainjob_crd(client, levels.LEVELS["v2.3"])
    assert str(err.value) == (
        f"the installed TrainJob CRD ({TRAINJOB_CRD}) is of API level v2.1 (trainer v2.1.0, jobset v0.10.1), "
        "but this manager runs API level v2.3 (trainer v2.3.0, jobset v0.12.0): "
        "install the CRDs of config/overlays/v2.3 or set apiLevel: v2.1 in the Configuration"
    )
    assert "\n" not in str(err.value)

    client = FakeClient([v2_3_like(v2_1_crd())], cluster_scoped=[CRD_GVK])
    with pytest.raises(levels.CrdLevelMismatch, match=r"is of API level v2\.3 .* runs API level v2\.1 "):
        await check_trainjob_crd(client, levels.LEVELS["v2.1"])


async def test_a_crd_of_no_known_level_is_refused_too() -> None:
    crd = v2_1_crd()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].pop(
        "podTemplateOverrides"
    )
    with pytest.raises(levels.CrdLevelMismatch, match=r"of no API level this manager knows \(v2\.1, v2\.3\)"):
        await check_trainjob_crd(FakeClient([crd], cluster_scoped=[CRD_GVK]), levels.LEVELS["v2.1"])


async def test_the_check_asks_again_through_transient_answers() -> None:
    # a manager restarted while the API server (or a proxy in front of it) fails must not exit
    client = FakeClient([v2_1_crd()], cluster_scoped=[CRD_GVK])
    client.inject_error(
        "get", InternalError("an error on the server (chaos) has prevented the request"), times=2
    )
    client.inject_error("get", TransportError("GET: connection refused"))
    await check_trainjob_crd(client, levels.LEVELS["v2.1"], retry_seconds=10)
    with pytest.raises(levels.CrdLevelMismatch):
        client.inject_error("get", TooManyRequests("slow down"))
        await check_trainjob_crd(client, levels.LEVELS["v2.3"], retry_seconds=10)


async def test_the_check_gives_up_on_other_errors_and_past_its_deadline() -> None:
    client = FakeClient([v2_1_crd()], cluster_scoped=[CRD_GVK])
    client.inject_error("get", BadRequest("no"))
    with pytest.raises(BadRequest):
        await check_trainjob_crd(client, levels.LEVELS["v2.1"], retry_seconds=10)
    client.inject_error("get", InternalError("down"), times=50)
    with pytest.raises(InternalError):
        await check_trainjob_crd(client, levels.LEVELS["v2.1"], retry_seconds=0.1)
