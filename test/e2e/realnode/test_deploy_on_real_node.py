"""The project's image deployed with ``make deploy`` on a local cluster with a real node, at the
default API level as a new user gets it, and at level v2.1.

The image is the session's clean-copy build (``test/image_build.py``, ``make docker-build``
with podman, shared with ``test/e2e/deploy/test_image.py``), saved with ``podman save`` and
imported into the real node's containerd (no registry is reachable). ``make deploy IMG=...
DEPLOY_PATCH=deploy-patch.yaml`` (and ``LEVEL=v2.1`` for the second run) applies
``config/default`` (``config/overlays/v2.1``) with one change, a toleration of the node's taint
and a nodeSelector for it, waits for the rollout and applies the level's shipped runtimes.

What that proves (``realnode_e2e.check_deployment``): the Deployment's Pod runs on the real node
as shipped (UID 65532, a read-only root, the certificate Secret the manager filled mounted by the
kubelet, the projected ServiceAccount token: it reaches the API server through the
``kubernetes`` Service, kube-proxy's rules), turns Ready by its probe; the Service is a plain
ClusterIP with the level's ports (v2.3: metrics 8443, webhook 443, status-server 10443); every
webhook, the TrainJob defaulter too at v2.3, is called by the API server through that ClusterIP,
the only way to the Pod; the metrics are scraped with a bearer token; at v2.3 any authenticated
user reads ``kubeflow-trainer-public``. A TrainJob on ``torch-distributed`` runs to Complete on
the KWOK nodes. The manager's log (read through the kubelet) has no ``forbidden`` and no
traceback. Then ``make undeploy`` while that TrainJob still names the runtime (at v2.1 its
in-use finalizer set, at v2.3 none: v2.3.0 sets none) returns and removes everything; stopping
leaves nothing on the host.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_build import ImageBuild
from realnode_e2e import (
    CRDS,
    FINALIZER,
    HERE,
    NAME,
    NS,
    TAG,
    TRAINER,
    V2_1,
    V2_3,
    Level,
    check_deployment,
    gone,
    make,
    manager_log_is_clean,
    node_cluster,
    runtime_finalizers,
    trainjob_completes_on_kwok,
)

from manager.envtest import Environment, realnode

pytestmark = pytest.mark.realnode


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    with node_cluster(tmp_path / "env") as environment:
        yield environment


@pytest.mark.parametrize("level", [V2_3, V2_1], ids=lambda level: level.name)
async def test_make_deploy_runs_the_manager_on_the_real_node_and_a_trainjob_completes(
    level: Level, env: Environment, controller_image: ImageBuild
) -> None:
    archive = await asyncio.to_thread(controller_image.archive, TAG)
    started = time.monotonic()
    await asyncio.to_thread(env.import_image, archive)
    print(f"ctr images import: {time.monotonic() - started:.1f} s")

    started = time.monotonic()
    await asyncio.to_thread(
        make, env, "deploy", *level.make_args, f"IMG={TAG}", f"DEPLOY_PATCH={HERE / 'deploy-patch.yaml'}",
        "DEPLOY_TIMEOUT=240s",
    )  # fmt: skip
    print(f"make deploy {' '.join(level.make_args)} (apply, rollout on the real node, runtimes): "
          f"{time.monotonic() - started:.1f} s")  # fmt: skip

    pod, ns = await check_deployment(env, level)
    took = await trainjob_completes_on_kwok(env, level, ns)
    print(f"TrainJob created to Complete: {took:.1f} s")
    await manager_log_is_clean(env, pod)

    # `make undeploy` while the TrainJob still names its runtime.
    assert (FINALIZER in await runtime_finalizers(env)) is level.runtime_finalizer
    started = time.monotonic()
    await asyncio.to_thread(make, env, "undeploy", *level.make_args, "DEPLOY_TIMEOUT=240s", timeout=400)
    print(f"make undeploy with a TrainJob naming torch-distributed: {time.monotonic() - started:.1f} s")
    for crd in CRDS:
        await gone(env, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}", timeout=5)
    await gone(env, f"{TRAINER}/clustertrainingruntimes/torch-distributed", timeout=5)
    await gone(env, f"/apis/apps/v1/namespaces/{NS}/deployments/{NAME}")
    await gone(env, f"/api/v1/namespaces/{NS}")

    assert env.node is not None
    state = env.node.state
    await env.stop()
    assert realnode.leaks(state) == []
