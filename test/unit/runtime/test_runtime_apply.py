"""Apply helpers (docs/behaviour/trainer.md §10 I): keyed upserts, env conversion and field extraction."""

from __future__ import annotations

from typing import Any

import pytest

from trainer.runtime.apply import (
    FieldPathNotFound,
    env_var,
    env_vars,
    extract_field,
    upsert_env_vars,
    upsert_ports,
    upsert_volume_mounts,
    upsert_volumes,
)

Json = dict[str, Any]


@pytest.mark.parametrize(
    ("existing", "new", "expected"),
    [
        ([], [{"name": "TEST", "value": "v"}], [{"name": "TEST", "value": "v"}]),  # spec: trainer I1
        (
            [{"name": "TEST", "value": "old"}],  # spec: trainer I2
            [{"name": "TEST", "value": "new"}],
            [{"name": "TEST", "value": "new"}],
        ),
        (
            [{"name": "EXISTING", "value": "e"}],  # spec: trainer I3
            [{"name": "NEW1", "value": "1"}, {"name": "NEW2", "value": "2"}],
            [
                {"name": "EXISTING", "value": "e"},
                {"name": "NEW1", "value": "1"},
                {"name": "NEW2", "value": "2"},
            ],
        ),
    ],
)
def test_i1_to_i3_upsert_env(existing: list[Json], new: list[Json], expected: list[Json]) -> None:
    upsert_env_vars(existing, new)
    assert existing == expected


@pytest.mark.parametrize(
    ("existing", "new", "expected"),
    [
        (
            [{"containerPort": 8080}],  # spec: trainer I4
            [{"containerPort": 8080, "protocol": "TCP"}],
            [{"containerPort": 8080, "protocol": "TCP"}],
        ),
        (
            [{"name": "http"}],  # spec: trainer I5
            [{"name": "http", "containerPort": 8080}],
            [{"name": "http", "containerPort": 8080}],
        ),
        ([{"containerPort": 8080}], [{"containerPort": 9090}], [{"containerPort": 9090}]),  # spec: trainer I6
        (
            [{"name": "http", "containerPort": 8080}],  # spec: trainer I7
            [{"name": "metrics", "containerPort": 9090}],
            [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9090}],
        ),
    ],
)
def test_i4_to_i7_upsert_ports(existing: list[Json], new: list[Json], expected: list[Json]) -> None:
    upsert_ports(existing, new)
    assert existing == expected


@pytest.mark.parametrize(
    ("existing", "new", "expected"),
    [
        (
            [{"name": "data"}],
            [{"name": "data", "emptyDir": {}}],
            [{"name": "data", "emptyDir": {}}],
        ),  # spec: trainer I8
        (
            [{"name": "existing"}],
            [{"name": "new"}],
            [{"name": "existing"}, {"name": "new"}],
        ),  # spec: trainer I9
        (
            [{"name": "vol1"}, {"name": "vol2"}],  # spec: trainer I10
            [{"name": "vol1", "emptyDir": {}}, {"name": "vol3"}],
            [{"name": "vol1", "emptyDir": {}}, {"name": "vol2"}, {"name": "vol3"}],
        ),
    ],
)
def test_i8_to_i10_upsert_volumes(existing: list[Json], new: list[Json], expected: list[Json]) -> None:
    upsert_volumes(existing, new)
    assert existing == expected


@pytest.mark.parametrize(
    ("existing", "new", "expected"),
    [
        (
            [{"name": "data", "mountPath": "/old-data"}],  # spec: trainer I11
            [{"name": "data", "mountPath": "/old-data", "readOnly": True}],
            [{"name": "data", "mountPath": "/old-data", "readOnly": True}],
        ),
        (
            [{"name": "existing", "mountPath": "/existing"}],  # spec: trainer I12
            [{"name": "new", "mountPath": "/new"}],
            [{"name": "existing", "mountPath": "/existing"}, {"name": "new", "mountPath": "/new"}],
        ),
        (
            [
                {"name": "vol1", "mountPath": "/data"},
                {"name": "vol2", "mountPath": "/config"},
            ],  # spec: trainer I13
            [{"name": "vol3", "mountPath": "/data", "readOnly": True}],
            [
                {"name": "vol3", "mountPath": "/data", "readOnly": True},
                {"name": "vol2", "mountPath": "/config"},
            ],
        ),
    ],
)
def test_i11_to_i13_upsert_mounts(existing: list[Json], new: list[Json], expected: list[Json]) -> None:
    upsert_volume_mounts(existing, new)
    assert existing == expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"name": "SIMPLE", "value": "value"}, {"name": "SIMPLE", "value": "value"}),  # spec: trainer I14
        (
            {
                "name": "C",
                "valueFrom": {"configMapKeyRef": {"name": "config", "key": "key", "optional": True}},
            },
            {
                "name": "C",
                "valueFrom": {"configMapKeyRef": {"name": "config", "key": "key", "optional": True}},
            },
        ),  # spec: trainer I15
        (
            {"name": "F", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ),  # spec: trainer I16
        (
            {
                "name": "R",
                "valueFrom": {
                    "resourceFieldRef": {
                        "containerName": "container",
                        "resource": "requests.cpu",
                        "divisor": "1m",
                    }
                },
            },
            {
                "name": "R",
                "valueFrom": {
                    "resourceFieldRef": {
                        "containerName": "container",
                        "resource": "requests.cpu",
                        "divisor": "1m",
                    }
                },
            },
        ),  # spec: trainer I17
        (
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "secret", "key": "key", "optional": True}}},
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "secret", "key": "key", "optional": True}}},
        ),  # spec: trainer I18
        (
            {
                "name": "B",
                "valueFrom": {
                    "fieldRef": {"fieldPath": "metadata.name"},
                    "resourceFieldRef": {"resource": "limits.memory"},
                },
            },
            {
                "name": "B",
                "valueFrom": {
                    "fieldRef": {"fieldPath": "metadata.name"},
                    "resourceFieldRef": {"containerName": "", "resource": "limits.memory", "divisor": "0"},
                },
            },
        ),  # spec: trainer I19
        ({"name": "EMPTY"}, {"name": "EMPTY", "value": ""}),
    ],
)
def test_i14_to_i19_env_var_conversion(env: Json, expected: Json) -> None:
    assert env_var(env) == expected


def test_i20_to_i22_env_vars() -> None:
    # spec: trainer I20 I21 I22
    assert env_vars([]) is None and env_vars(None) is None
    assert env_vars([{"name": "A", "value": "1"}]) == [{"name": "A", "value": "1"}]
    assert env_vars(
        [
            {"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
        ]
    ) == [
        {"name": "A", "value": "1"},
        {"name": "B", "valueFrom": {"configMapKeyRef": {"key": "k", "name": "c"}}},
    ]


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "test-pod"},
    "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {}, "env": [{"name": "A", "value": "1"}]}]
    },
}


def test_i23_to_i25_extract_field() -> None:
    # spec: trainer I23 I24 I25
    assert extract_field(POD, "metadata", "name") == "test-pod"
    containers = extract_field(POD, "spec", "containers")
    assert containers == [{"name": "c", "image": "i", "resources": {}, "env": [{"name": "A", "value": "1"}]}]
    containers[0]["name"] = "changed"
    assert POD["spec"]["containers"][0]["name"] == "c"  # type: ignore[index]
    with pytest.raises(FieldPathNotFound, match=r"^requested field path not found: '\.spec\.nonexistent'$"):
        extract_field(POD, "spec", "nonexistent")
