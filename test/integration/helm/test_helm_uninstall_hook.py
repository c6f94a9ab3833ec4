"""The chart's pre-delete hook as its pod runs it, against a real kube-apiserver and a running
manager at level v2.1.

`helm uninstall` runs the Job of templates/runtimes/cleanup-job.yaml before it deletes the
release's objects (upstream v2.3.0's chart has the same hook). There is neither a kubelet nor a
Job controller here (the real node runs the Job itself:
test/e2e/realnode/test_helm_rollout_undeploy_on_real_node.py), so the test runs the Job's
container as its pod would: the command, args and env `helm template` renders, in-cluster
config with a TokenRequest token of the hook's ServiceAccount, so only the chart's RBAC for it
applies. At level v2.1 the manager puts `trainer.kubeflow.org/resource-in-use` on a runtime a
TrainJob names: the hook deletes the release's runtimes (and no other), says which TrainJob holds
the one in use and keeps waiting, and ends once the TrainJob is deleted and the manager dropped
the finalizer. Run again (a second `helm uninstall` after a failed one), it finds nothing to do.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_helm_install import CHART, NS, RELEASE, Tools
from trainer_process import running_manager

from manager.envtest import Environment
from manager.testing import eventually
from trainer.api.trainer_constants import ResourceInUseFinalizer

ROOT = Path(__file__).resolve().parents[3]
HOOK = f"{RELEASE}-runtimes-installer"
RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    environment = Environment(
        tmp_path_factory.mktemp("helm-hook") / "env", crd_paths=[ROOT / "config" / "crd"]
    )
    asyncio.run(environment.start())
    try:
        yield environment
    finally:
        asyncio.run(environment.stop())


def _hook_objects(tools: Tools) -> list[Json]:
    """What the release holds for the hook: the Job (a hook), its RBAC and the two runtimes."""
    out = tools.ok(
        "helm", "template", RELEASE, str(CHART), "-n", NS,
        "--set", "apiLevel=v2.1",
        "--set", "runtimes.torchDistributed.enabled=true",
        "--set", "runtimes.deepspeedDistributed.enabled=true",
        "--show-only", "templates/runtimes/rbac.yaml",
        "--show-only", "templates/runtimes/runtimes.yaml",
        "--show-only", "templates/runtimes/cleanup-job.yaml",
    )  # fmt: skip
    return [d for d in yaml.safe_load_all(out) if d]


async def _runtime(env: Environment, name: str) -> Json | None:
    code, body = await env.request("GET", f"{RUNTIMES}/{name}")
    if code == 404:
        return None
    assert code == 200, body
    return dict(body)


async def _service_account_dir(env: Environment, directory: Path) -> Path:
    """The projected ServiceAccount volume of the hook's pod: token, cluster CA, namespace."""
    code, token = await env.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/{HOOK}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    assert code == 201, token
    return _write_volume(directory, token["status"]["token"], env.dir / "serving-ca.crt")


def _write_volume(directory: Path, token: str, ca: Path) -> Path:
    directory.mkdir()
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(ca.read_bytes())
    (directory / "namespace").write_text(NS)
    return directory


async def _run_hook(env: Environment, job: Json, sa_dir: Path, log: Path) -> asyncio.subprocess.Process:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["trainer-controller-manager"], container
    host, port = env.url.removeprefix("https://").rsplit(":", 1)
    environment = {
        "PATH": "/usr/bin:/bin",
        **{var["name"]: var["value"] for var in container.get("env") or []},
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_ACCOUNT_DIR": str(sa_dir),
    }
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / container["command"][0]),
            *container["args"],
            env=environment,
            cwd=sa_dir.parent,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )


async def test_the_hook_deletes_the_releases_runtimes_and_waits_for_the_one_a_trainjob_holds(
    env: Environment, tmp_path: Path
) -> None:
    tools = Tools(env)
    objects = _hook_objects(tools)
    (job,) = [o for o in objects if o["kind"] == "Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    manifests = tmp_path / "release.yaml"
    manifests.write_text(yaml.safe_dump_all([o for o in objects if o["kind"] != "Job"]))
    tools.ok("kubectl", "create", "namespace", NS)
    tools.ok("kubectl", "apply", "--server-side", "-f", str(manifests))
    # A runtime that is not the release's (applied by hand): the hook leaves it.
    tools.ok(
        "kubectl", "apply", "--server-side", "-f", str(ROOT / "config" / "runtimes" / "mlx-distributed.yaml")
    )

    team = f"team-{uuid.uuid4().hex[:6]}"
    tools.ok("kubectl", "create", "namespace", team)
    (tmp_path / "manager").mkdir()
    async with running_manager(env, tmp_path / "manager"):
        trainjob = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "mnist", "namespace": team},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}},
        }
        code, body = await env.request(
            "POST", f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{team}/trainjobs", trainjob
        )
        assert code == 201, body

        async def held() -> None:
            runtime = await _runtime(env, "torch-distributed")
            assert runtime and ResourceInUseFinalizer in runtime["metadata"].get("finalizers", []), runtime

        await eventually(held, timeout=60, message="the manager never marked torch-distributed in use")

        sa_dir = await _service_account_dir(env, tmp_path / "serviceaccount")
        log = tmp_path / "hook.log"
        hook = await _run_hook(env, job, sa_dir, log)
        try:

            async def waiting() -> None:
                assert hook.returncode is None, log.read_text()
                assert await _runtime(env, "deepspeed-distributed") is None
                runtime = await _runtime(env, "torch-distributed")
                assert runtime and runtime["metadata"].get("deletionTimestamp"), runtime
                assert f"named by TrainJobs {team}/mnist" in log.read_text(), log.read_text()

            await eventually(waiting, timeout=60, message="the hook never waited on the runtime in use")
            assert await _runtime(env, "mlx-distributed") is not None, "the hook deleted another's runtime"
            output = log.read_text()
            assert 'clustertrainingruntime.trainer.kubeflow.org "torch-distributed" deleted' in output, output
            assert f"finalizers {ResourceInUseFinalizer}" in output, output

            # The TrainJob goes: the manager drops the finalizer, the runtime goes, the hook ends.
            code, body = await env.request(
                "DELETE", f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{team}/trainjobs/mnist"
            )
            assert code == 200, body
            assert await asyncio.wait_for(hook.wait(), 60) == 0, log.read_text()
        finally:
            if hook.returncode is None:
                hook.kill()
                await hook.wait()
        assert await _runtime(env, "torch-distributed") is None
        assert "delete-runtimes: 2 ClusterTrainingRuntimes gone" in log.read_text(), log.read_text()

        # A second uninstall after a failed one runs the hook again: nothing left to do.
        again = await _run_hook(env, job, sa_dir, tmp_path / "again.log")
        assert await asyncio.wait_for(again.wait(), 60) == 0, (tmp_path / "again.log").read_text()
        assert "nothing to delete" in (tmp_path / "again.log").read_text()
    assert await _runtime(env, "mlx-distributed") is not None
