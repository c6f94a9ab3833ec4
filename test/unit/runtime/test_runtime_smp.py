"""The strategic-merge subset against known Kubernetes results on pod templates (docs/behaviour/trainer.md §2.4 step 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from manager.meta.strategicmerge import POD_TEMPLATE_SPEC, strategic_merge

Json = dict[str, Any]


def merge(original: Json, patch: Json) -> Json:
    return strategic_merge(original, patch, POD_TEMPLATE_SPEC)


def container(**fields: Any) -> Json:
    return {"spec": {"containers": [{"name": "c", **fields}]}}


def test_env_merge_order_asserted_by_upstream_integration_test() -> None:
    original = container(
        env=[{"name": "INIT_ENV", "value": "a"}, {"name": "DATASET_PATH", "value": "runtime"}]
    )
    patch = container(
        env=[{"name": "INIT_ENV", "value": "b"}, {"name": "NEW_VALUE", "value": "from_overrides"}]
    )
    assert merge(original, patch) == container(
        env=[
            {"name": "INIT_ENV", "value": "b"},
            {"name": "NEW_VALUE", "value": "from_overrides"},
            {"name": "DATASET_PATH", "value": "runtime"},
        ]
    )


def test_server_only_items_before_later_patched_items_keep_their_place() -> None:
    original = container(env=[{"name": "A"}, {"name": "B"}, {"name": "C"}])
    patch = container(env=[{"name": "C", "value": "c"}, {"name": "D"}])
    assert merge(original, patch) == container(
        env=[{"name": "A"}, {"name": "B"}, {"name": "C", "value": "c"}, {"name": "D"}]
    )


def test_patch_items_come_in_patch_order() -> None:
    original = container(env=[{"name": "A"}, {"name": "B"}, {"name": "C"}])
    patch = container(env=[{"name": "C", "value": "c"}, {"name": "A", "value": "a"}])
    assert merge(original, patch) == container(
        env=[{"name": "B"}, {"name": "C", "value": "c"}, {"name": "A", "value": "a"}]
    )


def test_volume_mounts_merge_by_mount_path_not_name() -> None:
    original = container(volumeMounts=[{"name": "data", "mountPath": "/a"}])
    patch = container(
        volumeMounts=[{"name": "data", "mountPath": "/b"}, {"name": "other", "mountPath": "/a"}]
    )
    assert merge(original, patch) == container(
        volumeMounts=[{"name": "data", "mountPath": "/b"}, {"name": "other", "mountPath": "/a"}]
    )


def test_maps_merge_and_null_deletes() -> None:
    original = {
        "metadata": {"labels": {"a": "1", "b": "2"}},
        "spec": {"nodeSelector": {"x": "1"}, "containers": []},
    }
    patch = {"metadata": {"labels": {"b": "3", "c": "4", "a": None}}, "spec": {"nodeSelector": {"y": "2"}}}
    assert merge(original, patch) == {
        "metadata": {"labels": {"b": "3", "c": "4"}},
        "spec": {"nodeSelector": {"x": "1", "y": "2"}, "containers": []},
    }


def test_tolerations_and_affinity_term_lists_are_replaced() -> None:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    original = {
        "spec": {
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term, term]}
                },
                "podAffinity": {"x": 1},
            },
        }
    }
    new_term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    patch = {
        "spec": {
            "tolerations": [{"key": "b", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [new_term]}
                }
            },
        }
    }
    assert merge(original, patch) == {
        "spec": {
            "tolerations": [{"key": "b", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [new_term]}
                },
                "podAffinity": {"x": 1},
            },
        }
    }


def test_overlapping_volume_sources_are_merged_not_replaced() -> None:
    original = {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}
    patch = {"spec": {"volumes": [{"name": "v", "secret": {"secretName": "s"}}]}}
    assert merge(original, patch) == {
        "spec": {"volumes": [{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]}
    }


def test_unknown_container_is_appended_and_command_replaced() -> None:
    original = {"spec": {"containers": [{"name": "a", "command": ["x", "y"]}]}}
    patch = {"spec": {"containers": [{"name": "a", "command": ["z"]}, {"name": "b"}]}}
    assert merge(original, patch) == {
        "spec": {"containers": [{"name": "a", "command": ["z"]}, {"name": "b"}]}
    }


def test_keyed_lists_absent_in_original_take_the_patch() -> None:
    patch = {"spec": {"imagePullSecrets": [{"name": "r"}], "schedulingGates": [{"name": "g"}]}}
    assert merge({"spec": {}}, patch) == patch


def test_original_is_not_modified() -> None:
    original = container(env=[{"name": "A", "value": "1"}])
    merge(original, container(env=[{"name": "A", "value": "2"}]))
    assert original == container(env=[{"name": "A", "value": "1"}])


GOLDEN = Path(__file__).resolve().parent / "testdata" / "smp_golden.json"


@pytest.mark.parametrize("case", json.loads(GOLDEN.read_text()), ids=lambda c: json.dumps(c["patch"])[:60])
def test_matches_apimachinery_strategicpatch(case: Json) -> None:
    """Random keyed-list merges, expected results computed by apimachinery v0.34.4 (testdata/smpcheck)."""
    assert merge(case["original"], case["patch"]) == case["merged"]
