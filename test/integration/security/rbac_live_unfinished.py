"""UNFINISHED (not collected: the name lacks test_): issue 13's live RBAC and secret-leak check.

Status: through the recording proxy the MPI TrainJob's reconcile stops after the SSH Secret's
apply (201) and never applies the hostfile ConfigMap or the JobSet; not yet understood (the
proxy, impersonation and API Priority and Fairness 429s are the suspects). Rename to test_*.py
once that is solved.

Security (issue 13): the shipped RBAC is what the manager uses, and no secret reaches logs or events.

The product (``python -m trainer``: every controller, the webhooks, the cert rotator, leader
election) runs as the ServiceAccount the shipped ClusterRoleBindings name, with only the shipped
ClusterRoles, through a recording proxy (``request_recorder``). It serves a torch TrainJob, an
MPI (DeepSpeed) TrainJob and a plain JobSet at debug log level. Then:

* every request it made was allowed (no 403), and every (group, resource, verb) it used is in the
  shipped roles;
* every verb the shipped roles grant was used in the run or is in ``NOT_EXERCISED`` with the code
  path that needs it (a grant that is neither fails the test: the role is wider than needed);
* no rule has a wildcard;
* the MPI SSH Secret is immutable, and no private key, no Secret value, no bearer token appears
  in the manager's log or in any Event.
"""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml
from request_recorder import RecordingProxy, verbs_used
from trainer_process import running_manager

from manager.client import AlreadyExists, Client, NotFound
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.scheme import GroupVersionKind
from manager.testing import eventually
from webhooks.certs import MWC_GVK, SECRET_GVK, VWC_GVK

ROOT = Path(__file__).resolve().parents[3]
RBAC = ROOT / "config" / "rbac"
SYSTEM_NS = "kubeflow-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{SYSTEM_NS}:kubeflow-trainer-controller-manager"
CERT_SECRET = "kubeflow-trainer-webhook-cert"
NEVER = {"matchLabels": {"trainer-test/never": "match"}}
TRAINER = "trainer.kubeflow.org/v1alpha1"
Json = dict[str, Any]
Grant = tuple[str, str, str]  # apiGroup, resource, verb

# Grants the run does not exercise, each with the code path that needs it. Keep this list short
# and true: a grant not used and not listed fails the test.
NOT_EXERCISED: dict[Grant, str] = {}


def shipped_rules() -> list[Json]:
    rules: list[Json] = []
    for name in ("role.yaml", "role_extra.yaml", "metrics_auth_role.yaml"):
        for doc in yaml.safe_load_all((RBAC / name).read_text()):
            if doc and doc.get("kind") == "ClusterRole":
                rules.extend(doc.get("rules") or [])
    return rules


def shipped_grants() -> set[Grant]:
    return {
        (group, resource, verb)
        for rule in shipped_rules()
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
    }


@contextlib.asynccontextmanager
async def system_objects(client: Client) -> AsyncIterator[None]:
    """What config/default creates before the manager starts: the namespace, the empty webhook
    Secret and the webhook configurations (here with selectors that match nothing: the rotator
    injects its CA, the API server never calls them)."""
    with contextlib.suppress(AlreadyExists):
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}})
    with contextlib.suppress(AlreadyExists):
        await client.create(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": CERT_SECRET, "namespace": SYSTEM_NS}}
        )
    docs = [
        d
        for name in ("trainer.yaml", "jobset.yaml")
        for d in yaml.safe_load_all((ROOT / "config" / "webhook" / name).read_text())
        if d
    ]
    for doc in docs:
        for hook in doc["webhooks"]:
            hook["namespaceSelector"] = NEVER
            hook["objectSelector"] = NEVER
        with contextlib.suppress(AlreadyExists):
            await client.create(doc)
    try:
        yield
    finally:
        for doc in docs:
            gvk = VWC_GVK if doc["kind"] == "ValidatingWebhookConfiguration" else MWC_GVK
            with contextlib.suppress(NotFound):
                await client.delete_by_name(gvk, doc["metadata"]["name"], "")
        with contextlib.suppress(NotFound):
            await client.delete_by_name(SECRET_GVK, CERT_SECRET, SYSTEM_NS)


def trainjob(name: str, namespace: str, runtime: str) -> Json:
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {
                "name": runtime,
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
            },
            "trainer": {"numNodes": 2},
        },
    }


def plain_jobset(namespace: str) -> Json:
    container = {"name": "c", "image": "busybox:1.36", "command": ["true"]}
    pod_spec = {"restartPolicy": "Never", "containers": [container]}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "plain", "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 2,
                    "template": {"spec": {"template": {"spec": pod_spec}}},
                }
            ]
        },
    }


SECRET_PATTERNS = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"PRIVATE KEY"),
    re.compile(r"Bearer [A-Za-z0-9._-]{8,}"),
    re.compile(r"\bssh-(rsa|ed25519|dss)\b|ecdsa-sha2-nistp"),  # not secret, but the key file's twin
]


def secret_values(secret: Json) -> list[str]:
    """The Secret's values as they could leak: base64 (as stored) and decoded, line by line."""
    values: list[str] = []
    for encoded in (secret.get("data") or {}).values():
        values.append(encoded)
        decoded = base64.b64decode(encoded).decode(errors="replace")
        values.extend(line for line in decoded.splitlines() if len(line) >= 24 and "-----" not in line)
    return values


async def test_manager_uses_exactly_the_shipped_rbac_and_leaks_no_secret(
    control_plane: Environment, namespace: str, tmp_path: Path
) -> None:
    env = control_plane
    await env.apply_manifests([RBAC / "role.yaml", RBAC / "role_extra.yaml", RBAC / "role_binding.yaml"])
    await env.apply_manifests([RBAC / "metrics_auth_role.yaml", RBAC / "metrics_auth_role_binding.yaml"])
    await env.apply_manifests(
        [
            ROOT / "config" / "runtimes" / "torch-distributed.yaml",
            ROOT / "config" / "runtimes" / "deepspeed-distributed.yaml",
        ]
    )
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{SYSTEM_NS}", "system:authenticated"]
    config = await load_kubeconfig(env.kubeconfig)
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    async with (
        Cluster(config, field_owner="test") as cluster,
        RecordingProxy(env, SERVICE_ACCOUNT, groups, tmp_path) as proxy,
    ):
        admin = Client(cluster.transport, cluster.mapper, field_owner="test")
        async with (
            system_objects(admin),
            running_manager(
                env,
                tmp_path,
                {
                    "certManagement": {"enable": True},
                    "leaderElection": {"leaderElect": True, "resourceNamespace": SYSTEM_NS},
                },
                args=[f"--kubeconfig={proxy.kubeconfig()}", "--zap-log-level=debug"],
                cert_dir=cert_dir,
                wait_ready=False,
            ) as manager,
        ):

            async def cert_secret() -> Json:
                secret: Json = await admin.get(SECRET_GVK, CERT_SECRET, SYSTEM_NS)
                assert (secret.get("data") or {}).get("tls.key"), "the rotator has not filled the Secret"
                return secret

            webhook_secret = await eventually(cert_secret, timeout=90)
            for key, value in webhook_secret["data"].items():  # the kubelet mounts the Secret
                (cert_dir / key).write_bytes(base64.b64decode(value))
            await eventually(manager.ready, timeout=90)

            await admin.create(trainjob("torch", namespace, "torch-distributed"))
            await admin.create(trainjob("mpi", namespace, "deepspeed-distributed"))
            await admin.create(plain_jobset(namespace))

            async def workload_reconciled() -> Json:
                for name in ("torch", "mpi"):
                    await admin.get(
                        GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet"), name, namespace
                    )
                jobs = await admin.list(GroupVersionKind("batch", "v1", "Job"), namespace=namespace)
                assert len(jobs) >= 3, [j["metadata"]["name"] for j in jobs]
                secret: Json = await admin.get(SECRET_GVK, "mpi-mpi-ssh-auth", namespace)
                return secret

            try:
                ssh_secret = await eventually(workload_reconciled, timeout=90)
            except Exception:
                for r in proxy.requests:
                    if r.status >= 400 or (r.seconds > 5 and r.query.get("watch") not in ("true", "1")):
                        print("PROXY", r)
                print(
                    "TJ",
                    await admin.get(
                        GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob"), "mpi", namespace
                    ),
                )
                print("PENDING", [p for p in proxy.pending.values() if "watch=" not in p])
                raise
            # the MPI SSH Secret is immutable (upstream sets Immutable: true)
            assert ssh_secret.get("immutable") is True, ssh_secret.get("immutable")
            assert ssh_secret["type"] == "kubernetes.io/ssh-auth"
            events = await admin.list(GroupVersionKind("", "v1", "Event"), namespace=namespace)
    used = verbs_used(proxy.requests)
    forbidden = [r for r in proxy.requests if r.status == 403]
    assert not forbidden, [(r.method, r.path) for r in forbidden]

    # -- RBAC: sufficient, and no wider than needed
    granted = shipped_grants()
    used_grants = {(g, r, v) for (g, r), verbs in used.items() for v in verbs}
    missing = sorted(used_grants - granted)
    assert not missing, f"used but not granted by config/rbac: {missing}"
    unused = sorted(granted - used_grants - set(NOT_EXERCISED))
    print("\nRBAC used:", sorted(used_grants))
    assert not unused, f"granted by config/rbac but never used (and not justified): {unused}"
    stale = sorted(set(NOT_EXERCISED) & used_grants)
    assert not stale, f"listed as not exercised, but the run used them: {stale}"

    # -- no secret material in the log or in events
    log = manager.log_path.read_text(errors="replace")
    assert '"level":"debug"' in log  # the debug level was on
    texts = {"manager log": log, "events": yaml.safe_dump(events)}
    leaked_values = secret_values(ssh_secret) + secret_values(webhook_secret)
    for where, text in texts.items():
        for pattern in SECRET_PATTERNS:
            match = pattern.search(text)
            assert match is None, f"{where} contains {match.group(0)!r}"
        for value in leaked_values:
            assert value not in text, f"{where} contains a Secret value ({value[:12]}...)"
