"""The Flux plugin of level v2.3 (Trainer v2.3.0's ``plugins/flux``; docs/behaviour/trainer.md
§12.11): what it puts on the ``node`` job, the ConfigMap and Secret it builds, what it refuses.

The expectations of ``testdata/flux_go_v2_3_0.json`` are what upstream's own plugin built for
the same inputs (``testdata/flux_go``: its ``EnforceMLPolicy`` and ``Build`` run by Go); the
rest follows upstream's ``flux_test.go``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from runtime_fixtures import FakeReader, RecordingIndexer, rjob, training_runtime, trainjob

from trainer.api.trainer_v1alpha1 import MLPolicy, TrainJob
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.info import ContainerInfo, Info, PodSet, RuntimePolicy, TemplateSpec
from trainer.runtime.levels.v2_1 import V2_1
from trainer.runtime.levels.v2_3 import V2_3
from trainer.runtime.plugins import new_registry
from trainer.runtime.plugins.flux import (
    BROKER_TEMPLATE,
    ENTRYPOINT_TEMPLATE,
    INIT_TEMPLATE,
    Flux,
    curve_certificate,
    encode_z85,
    host_range,
    hostlist,
    original_command,
)
from trainer.runtime.registry import TRAINING_RUNTIME_KEY, new_runtimes

Json = dict[str, Any]

GO = json.loads((Path(__file__).parent / "testdata" / "flux_go_v2_3_0.json").read_text())
"""Per case: the inputs, then the TrainJob's command/args, the node PodSet and the objects Go built."""


def go_inputs(case: Json) -> tuple[Info, TrainJob]:
    """The Info and TrainJob ``testdata/flux_go/main.go`` gives upstream's plugin for ``case``."""
    node: Json = {"name": "node", "resources": {}}
    if case["RuntimeGPUs"]:
        node["resources"] = {"limits": {"nvidia.com/gpu": case["RuntimeGPUs"]}}
    spec = {
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [node]}}},
                },
            }
        ]
    }
    container = ContainerInfo(
        name="node",
        command=case["RuntimeCommand"],
        env=[{"name": k, "value": v} for k, v in case["RuntimeEnv"] or ()],
    )
    info = Info(
        runtime_policy=RuntimePolicy(
            ml_policy=MLPolicy.from_dict({"flux": {"numProcPerNode": case["PolicyProcs"]}})
        ),
        template_spec=TemplateSpec(
            obj_apply=spec,
            pod_sets=[PodSet(name="node", ancestor="trainer", count=1, containers=[container])],
        ),
    )
    trainer: Json = {"numNodes": case["NumNodes"]}
    if case["JobProcs"] is not None:
        trainer["numProcPerNode"] = case["JobProcs"]
    if case["JobCommand"] is not None:
        trainer["command"] = case["JobCommand"]
    if case["JobArgs"] is not None:
        trainer["args"] = case["JobArgs"]
    if case["JobEnv"]:
        trainer["env"] = [{"name": k, "value": v} for k, v in case["JobEnv"]]
    if case["JobGPUs"]:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": case["JobGPUs"]}}
    tj = TrainJob.from_dict(
        {
            "metadata": {"name": "flux-job", "namespace": "ns-x", "uid": case["UID"]},
            "spec": {"runtimeRef": {"name": "r"}, "trainer": trainer},
        }
    )
    return info, tj


def container_json(c: ContainerInfo) -> Json:
    out: Json = {"name": c.name}
    for key, value in (
        ("image", c.image),
        ("command", c.command),
        ("env", c.env),
        ("volumeMounts", c.volume_mounts),
    ):
        if value:
            out[key] = value
    return out


# -- against what Go built ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(GO))
async def test_the_node_job_and_objects_are_what_upstreams_plugin_builds(name: str) -> None:
    want = GO[name]
    info, tj = go_inputs(want["input"])
    plugin = Flux()
    plugin.enforce_ml_policy(info, tj)
    assert tj.spec is not None and tj.spec.trainer is not None
    assert tj.spec.trainer.command == want["command"]
    assert tj.spec.trainer.args == want["args"]
    (pod_set,) = info.template_spec.pod_sets
    assert [container_json(c) for c in pod_set.init_containers] == want["initContainers"]
    assert [container_json(c) for c in pod_set.containers] == want["containers"]
    assert pod_set.volumes == want["volumes"]
    configmap, secret = await plugin.build(info, tj)
    assert (configmap["apiVersion"], configmap["kind"]) == ("v1", "ConfigMap")
    assert configmap["metadata"] == want["objects"]["ConfigMap"]["metadata"]
    # byte for byte: the scripts with their settings, hosts, resources and flags
    assert configmap["data"] == want["objects"]["ConfigMap"]["data"]
    assert (secret["apiVersion"], secret["kind"]) == ("v1", "Secret")
    assert "type" not in secret  # Opaque, as the API server defaults it
    assert secret["metadata"] == want["objects"]["Secret"]["metadata"]
    cert = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert cert == want["objects"]["Secret"]["data"]


def test_the_templates_are_upstreams_files() -> None:
    # sha256 of v2.3.0's plugins/flux/templates/{broker.toml,init.sh,entrypoint.sh}
    import hashlib

    assert [
        hashlib.sha256(t.encode()).hexdigest() for t in (BROKER_TEMPLATE, INIT_TEMPLATE, ENTRYPOINT_TEMPLATE)
    ] == [
        "d376bed489b1b3872c5b3430836639450c35e1fbac99a080b078e4f3a733717f",
        "0688b50e09faf7df7cd11438a175e1ec64a08ea5846aa64dd25660695dcde222",
        "eafc5adfc066a45ce41a4ac4135e5338cdb5b578f6a5785d28edb0ac8e6f0528",
    ]


# -- upstream's flux_test.go -------------------------------------------------------------------


def test_curve_certificate_is_deterministic_per_uid_and_four_space_indented() -> None:
    first = curve_certificate("test-job", "12345-67890")
    assert first == curve_certificate("test-job", "12345-67890")
    assert first != curve_certificate("test-job", "different-uid")
    for needle in ("metadata", "curve", "    public-key =", "    secret-key =", 'name = "test-job"'):
        assert needle in first


def test_encode_z85() -> None:
    assert len(encode_z85(bytes(32))) == 40
    assert encode_z85(bytes([1, 2, 3])) == ""
    assert encode_z85(bytes(4)) == "00000"
    # RFC 32's test vector
    assert encode_z85(bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])) == "HelloWorld"


@pytest.mark.parametrize(("size", "start", "want"), [(1, 0, "0"), (4, 0, "0-3"), (3, 10, "10-12")])
def test_host_range(size: int, start: int, want: str) -> None:
    assert host_range(size, start) == want


@pytest.mark.parametrize(
    ("prefix", "size", "want"),
    [
        ("lammps-job", 1, "lammps-job-node-0-[0]"),
        ("flux-cluster", 4, "flux-cluster-node-0-[0-3]"),
        ("", 2, "-node-0-[0-1]"),
    ],
)
def test_hostlist(prefix: str, size: int, want: str) -> None:
    assert hostlist(prefix, size) == want


@pytest.mark.parametrize(
    ("command", "args", "want"),
    [
        (["python"], ["train.py", "--epochs", "10"], "python train.py --epochs 10"),
        (["  python  "], [" script.py "], "python    script.py"),
        # Go's TrimSpace keeps U+001C..U+001F, which Python's str.strip would drop
        (["\x1cpython"], None, "\x1cpython"),
    ],
)
def test_original_command(command: list[str], args: list[str] | None, want: str) -> None:
    tj = TrainJob.from_dict(
        {"spec": {"runtimeRef": {"name": "r"}, "trainer": {"command": command, "args": args}}}
    )
    assert tj.spec is not None and tj.spec.trainer is not None
    assert original_command(tj.spec.trainer, Info()) == want


# -- through the runtime: registration, the JobSet, validation ---------------------------------


def flux_runtime(num_proc_per_node: int = 1, *, init_containers: list[Json] | None = None) -> Json:
    """The shape of v2.3.0's examples/flux/flux-runtime.yaml: one trainer job."""
    node = {"name": "node", "image": "ubuntu:jammy", "command": ["echo", "hi"], "args": ["--from-runtime"]}
    return training_runtime(
        rjobs=[rjob("node", "trainer", [node], init_containers=init_containers)],
        ml_policy={"numNodes": 1, "flux": {"numProcPerNode": num_proc_per_node}},
    )


async def objects_for(rt: Json, level: Any = V2_3, **trainer: Any) -> list[Json]:
    runtimes = await new_runtimes(FakeReader([rt]), RecordingIndexer(), level=level)
    return await runtimes[TRAINING_RUNTIME_KEY].new_objects(trainjob(trainer=trainer))


async def validate(rt: Json, **trainer: Any) -> list[str]:
    runtimes = await new_runtimes(FakeReader([rt]), RecordingIndexer(), level=V2_3)
    _, errors = await runtimes[TRAINING_RUNTIME_KEY].validate_objects(None, trainjob(trainer=trainer))
    return [str(e) for e in errors]


def test_flux_is_registered_after_the_other_v2_3_policies_and_before_jobset_at_v2_3_only() -> None:
    names = list(new_registry(V2_3))
    assert names.index("Flux") == names.index("XGBoost") + 1
    assert names.index("Flux") < names.index("JobSet")
    assert "Flux" not in new_registry(V2_1)


async def test_the_jobset_runs_the_entrypoint_after_the_installer_and_the_objects_come_first() -> None:
    objects = await objects_for(flux_runtime(), numNodes=2, env=[{"name": "FOO", "value": "bar"}])
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "test-job-flux-entrypoint"),
        ("Secret", "test-job-flux-curve"),
        ("JobSet", "test-job"),
    ]
    (job,) = objects[2]["spec"]["replicatedJobs"]
    assert job["template"]["spec"]["parallelism"] == 2  # PlainML's count
    pod = job["template"]["spec"]["template"]["spec"]
    assert pod["initContainers"] == [
        {
            "name": "flux-installer",
            "command": ["/bin/bash", "/etc/flux-config/init.sh"],
            "image": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
            "volumeMounts": [
                {"name": "flux-install", "mountPath": "/mnt/flux"},
                {"name": "test-job-flux-entrypoint", "mountPath": "/etc/flux-config", "readOnly": True},
            ],
        }
    ]
    (node,) = pod["containers"]
    # the runtime's command and args become the entrypoint's one argument; the args stay (Go
    # writes the TrainJob's args only when it has some, and the plugin clears them)
    assert node["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "echo hi"]
    assert node["args"] == ["--from-runtime"]
    assert node["env"] == [{"name": "FOO", "value": "bar"}]
    assert [m["mountPath"] for m in node["volumeMounts"]] == [
        "/mnt/flux",
        "/opt/software",
        "/etc/flux-config",
        "/curve",
        "/dev/shm",
    ]
    assert [v["name"] for v in pod["volumes"]] == [
        "spack-install",
        "flux-install",
        "test-job-flux-entrypoint",
        "shared-memory",
        "flux-curve",
    ]
    init = objects[0]["data"]["init.sh"]
    assert 'hosts="test-job-node-0-[0-1]"' in init
    assert 'default_connect = "tcp://%h.test-job.default.svc.cluster.local:%p"' in init


async def test_the_trainjobs_command_and_args_are_wrapped_and_its_args_dropped() -> None:
    objects = await objects_for(flux_runtime(), numNodes=1, command=["lmp"], args=["-in", "x"])
    node = objects[2]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert node["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "lmp -in x"]
    assert node["args"] == ["--from-runtime"]


async def test_an_init_container_of_the_runtime_keeps_its_place_before_the_installer() -> None:
    rt = flux_runtime(init_containers=[{"name": "setup", "image": "busybox"}])
    objects = await objects_for(rt, numNodes=1)
    pod = objects[2]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["setup", "flux-installer"]
    assert pod["initContainers"][0] == {"name": "setup", "image": "busybox", "resources": {}}


async def test_the_same_trainjob_gets_the_same_certificate_every_reconcile() -> None:
    first = await objects_for(flux_runtime(), numNodes=1)
    second = await objects_for(flux_runtime(), numNodes=1)
    assert first[1]["data"] == second[1]["data"]


async def test_a_trainjob_without_num_nodes_fails_with_the_field_named() -> None:
    # upstream dereferences numNodes (a recovered panic, no objects); we fail the same reconcile
    with pytest.raises(RuntimeFailure) as failure:
        await objects_for(flux_runtime())
    assert failure.value.message.startswith("spec.trainer.numNodes: Required value")


async def test_a_trainjob_without_trainer_fails_with_the_field_named() -> None:
    runtimes = await new_runtimes(FakeReader([flux_runtime()]), RecordingIndexer(), level=V2_3)
    with pytest.raises(RuntimeFailure) as failure:
        await runtimes[TRAINING_RUNTIME_KEY].new_objects(trainjob())
    assert failure.value.message.startswith("spec.trainer: Required value")


async def test_at_v2_1_a_flux_policy_builds_no_flux_objects() -> None:
    objects = await objects_for(flux_runtime(), level=V2_1, numNodes=1)
    assert [o["kind"] for o in objects] == ["JobSet"]


async def test_validate_refuses_fewer_than_one_process_per_node() -> None:
    message = "must be greater than or equal to 1 for Flux TrainJob"
    assert await validate(flux_runtime(0)) == [f"spec.trainer.numProcPerNode: Invalid value: 0: {message}"]
    assert await validate(flux_runtime(1), numProcPerNode=0) == [
        f"spec.trainer.numProcPerNode: Invalid value: 0: {message}"
    ]
    # the TrainJob's value is the one that counts
    assert await validate(flux_runtime(0), numProcPerNode=2) == []
    assert await validate(flux_runtime(1)) == []


async def test_validate_refuses_a_runtime_init_container_named_flux_installer() -> None:
    rt = flux_runtime(init_containers=[{"name": "flux-installer", "image": "x"}])
    assert await validate(rt) == [
        "spec.trainer.initContainers: Invalid value: \"flux-installer\": InitContainer 'flux-installer' is reserved"
    ]


async def test_validate_leaves_other_runtimes_alone() -> None:
    rt = training_runtime(rjobs=[rjob("node", "trainer", [{"name": "node"}])], ml_policy={"numNodes": 1})
    assert await validate(rt, numProcPerNode=0) == []
