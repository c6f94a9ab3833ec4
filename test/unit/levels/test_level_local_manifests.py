"""What `make install`, `make run`, `make cluster-up` and `make deploy` put into a cluster at each
API level (`LEVEL=v2.3`): the level's manifests, taken from the `ApiLevel` value."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_level_manifests import ROOT, key, rendered

from trainer import install, levels
from trainer.install import ApiLevel

Json = dict[str, Any]
NS = "kubeflow-system"
V2_3 = levels.get("v2.3")
V2_3_RUNTIMES = {
    "deepspeed-distributed",
    "jax-distributed",
    "mlx-distributed",
    "torch-distributed",
    "torchtune-llama3.2-1b",
    "torchtune-llama3.2-3b",
    "torchtune-qwen2.5-1.5b",
    "xgboost-distributed",
}


@pytest.mark.parametrize("level", levels.LEVELS.values(), ids=lambda level: level.name)
def test_make_install_renders_what_the_levels_deployment_and_runtimes_install(level: ApiLevel) -> None:
    """Every object `make install LEVEL=<level>` applies is, field for field, the one
    `kubectl kustomize` renders from the level's deployment (`ApiLevel.manifests`) or its shipped
    runtimes (`ApiLevel.runtimes`): the built-in reader needs no kubectl, and no copy drifts."""
    ours = {key(d): d for d in install.render(install.local_dir(level))}
    deployment = {key(d): d for d in rendered(ROOT / "config" / level.manifests)}
    runtimes = {key(d): d for d in rendered(ROOT / "config" / level.runtimes)}
    assert len(ours) == len(install.render(install.local_dir(level))), "an object is listed twice"
    for k, doc in ours.items():
        theirs = runtimes[k] if doc["kind"] == "ClusterTrainingRuntime" else deployment[k]
        assert doc == theirs, f"{k} differs from what config/{level.manifests} renders"
    assert {k for k in ours if k[0] == "ClusterTrainingRuntime"} == set(runtimes)
    crds, _objects, hooks = install.split(ours.values())
    assert (
        levels.of_trainjob_crd(next(c for c in crds if c["metadata"]["name"] == install.TRAINJOB_CRD))
        is level
    )
    # every webhook configuration the level's manager serves is registered by `make run`
    assert {d["metadata"]["name"] for d in hooks} == {
        d["metadata"]["name"] for d in deployment.values() if d["kind"] in install.WEBHOOK_KINDS
    }


def test_at_v2_3_make_install_adds_the_public_configmap_its_rbac_and_v2_3_0s_runtimes() -> None:
    ours = {key(d): d for d in install.render(install.local_dir(V2_3))}
    crds, objects, hooks = install.split(ours.values())
    assert [key(d) for d in objects if d["kind"] != "ClusterTrainingRuntime"] == [
        ("Namespace", "", NS),  # before what lives in it
        ("ConfigMap", NS, "kubeflow-trainer-public"),
        ("Role", NS, "kubeflow-trainer-public"),
        ("RoleBinding", NS, "kubeflow-trainer-public"),
    ]
    assert ours[("ConfigMap", NS, "kubeflow-trainer-public")]["data"] == {
        "kubeflow_trainer_version": V2_3.trainer_version
    }
    assert {d["metadata"]["name"] for d in objects if d["kind"] == "ClusterTrainingRuntime"} == V2_3_RUNTIMES
    assert "defaulter.trainer.kubeflow.org" in {d["metadata"]["name"] for d in hooks}
    assert len(crds) == 6


def _paths(level: str, what: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "--no-print-directory", "-f", "-", "print", f"LEVEL={level}", f"WHAT={what}"],
        cwd=ROOT,
        input="include Makefile\nprint:\n\t@$(LEVEL_PATHS) $(WHAT)\n",
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("level", levels.LEVELS.values(), ids=lambda level: level.name)
def test_the_makefile_takes_the_levels_manifests_from_the_level(level: ApiLevel) -> None:
    """`make cluster-up/deploy LEVEL=...` read their paths from the `ApiLevel` value."""
    for what, expected in (
        ("manifests", [f"config/{level.manifests}"]),
        ("runtimes", [f"config/{level.runtimes}"]),
        ("crds", [str(p.relative_to(ROOT)) for p in install.crd_files(level)]),
    ):
        out = _paths(level.name, what)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == expected
    crd_names = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in install.crd_files(level)}
    assert crd_names == {
        d["metadata"]["name"]
        for d in rendered(ROOT / "config" / level.manifests)
        if d["kind"] == "CustomResourceDefinition"
    }


def test_an_unknown_level_is_refused_naming_the_levels() -> None:
    out = _paths("v9.9", "manifests")
    assert out.returncode != 0
    assert "LEVEL=v9.9: no API level 'v9.9' (levels: v2.1, v2.3)" in out.stderr


def test_make_install_and_uninstall_take_the_level(tmp_path: Path) -> None:
    """The recipes pass LEVEL on (`make -n` prints what they would run)."""
    for target in ("install", "uninstall", "run", "cluster-up"):
        out = subprocess.run(
            ["make", "-n", "--no-print-directory", target, "LEVEL=v2.3"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert "--level 'v2.3'" in out.stdout, (target, out.stdout)
