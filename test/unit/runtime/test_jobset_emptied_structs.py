"""``drop_emptied_structs``: no ``{}`` the live JobSet has filled reaches server-side apply."""

from __future__ import annotations

import copy
from typing import Any

from trainer.runtime.plugins.jobset import drop_emptied_structs

Json = dict[str, Any]


def spec(pod_meta: Json, *, resources: Json, volumes: list[Json] | None = None) -> Json:
    pod: Json = {
        "metadata": pod_meta,
        "spec": {
            "containers": [{"name": "node", "image": "i", "resources": resources}],
            "volumes": volumes or [],
        },
    }
    return {"replicatedJobs": [{"name": "node", "template": {"metadata": {}, "spec": {"template": pod}}}]}


def test_an_empty_struct_the_live_jobset_has_filled_is_left_out() -> None:
    document = spec({}, resources={})
    live = spec({"labels": {"kueue": "x"}}, resources={"requests": {"cpu": "1"}})
    drop_emptied_structs(document, live)
    pod = document["replicatedJobs"][0]["template"]["spec"]["template"]
    assert "metadata" not in pod
    assert "resources" not in pod["spec"]["containers"][0]
    # empty in both: kept, as upstream writes it
    assert document["replicatedJobs"][0]["template"]["metadata"] == {}


def test_nothing_changes_on_create_or_when_the_struct_is_set() -> None:
    document = spec({"labels": {"a": "b"}}, resources={})
    before = copy.deepcopy(document)
    drop_emptied_structs(document, None)
    assert document == before
    drop_emptied_structs(document, spec({"labels": {"c": "d"}}, resources={}))
    assert document == before


def test_volumes_are_left_alone_an_empty_dir_means_something() -> None:
    document = spec({}, resources={}, volumes=[{"name": "data", "emptyDir": {}}])
    live = spec({}, resources={}, volumes=[{"name": "data", "emptyDir": {"medium": "Memory"}}])
    drop_emptied_structs(document, live)
    assert document["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"] == [
        {"name": "data", "emptyDir": {}}
    ]


def test_items_are_matched_by_name_not_position() -> None:
    document = spec({}, resources={})
    live = spec({}, resources={"limits": {"cpu": "1"}})
    live["replicatedJobs"].insert(0, {"name": "other", "template": {"metadata": {"labels": {"x": "y"}}}})
    drop_emptied_structs(document, live)
    assert (
        "resources"
        not in document["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    )
    assert document["replicatedJobs"][0]["template"]["metadata"] == {}
