"""Security: the manager works with the shipped RBAC only, and no secret reaches its logs or events.

The product (``python -m trainer``: every controller, the webhooks, the cert rotator, leader
election, secure metrics) runs with the token of the ServiceAccount the shipped
ClusterRoleBindings name (a TokenRequest token in its kubeconfig, no client certificate), at
debug log level, through a recording proxy (``request_recorder``) that passes the token on and
records every request. The shipped webhooks, limited to the test namespace, call it (the API
server reaches it at 127.0.0.1 with a serving certificate of the test's; the rotator still
generates its own CA and certificate into the shipped Secret). It serves a torch TrainJob, an
MPI TrainJob (the shipped DeepSpeed runtime: SSH Secret, hostfile ConfigMap) and a plain JobSet,
and a Prometheus ServiceAccount scrapes its metrics (TokenReview and SubjectAccessReview of that
token). Then:

* every request it made was allowed (no 401/403), every (group, resource, verb) it used is
  granted by the shipped roles, and every grant it did not use is justified by
  ``why_not_exercised`` (upstream's role as shipped, a cached read, or the code path of this
  manager that needs it and the run does not reach): an unjustified grant fails the test;
* the MPI SSH Secret is ``immutable: true`` and the API server refuses a change of its data;
* neither the manager's log (debug level) nor any Event of the namespaces involved contains
  the SSH private key, the manager's or the scraper's token, or a private key of the webhook
  certificates (the rotator's CA and serving keys, the serving key in the cert dir) -- searched as the key material itself: PEM text, the DER bytes (as the PEM's
  base64 and as hex), the Secret's stored base64 form, the private scalar, the JWT's payload and
  signature, in pieces so a truncated copy is found too (``secret_leaks``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from request_recorder import RecordingProxy, verbs_used
from secret_leaks import leaks, private_key_forms, token_forms
from trainer_process import RunningManager, running_manager, webhook_configurations

from manager.envtest import Environment
from manager.envtest.process import free_port
from manager.testing import eventually
from trainer.conformance.webhook_probes import wait_webhooks_effective

ROOT = Path(__file__).resolve().parents[3]
RBAC = ROOT / "config" / "rbac"
SYSTEM_NS = "kubeflow-system"
MANAGER_SA = "kubeflow-trainer-controller-manager"
CERT_SECRET = "kubeflow-trainer-webhook-cert"
NEVER = {"matchLabels": {"trainer-test/never": "match"}}
TRAINER = "trainer.kubeflow.org/v1alpha1"
READER_BINDING = "trainer-security-test-metrics-reader"
Json = dict[str, Any]
Grant = tuple[str, str, str]  # apiGroup, resource, verb

# Grants the run does not exercise, and why they are shipped. A grant neither used by the run
# nor justified here fails the test (the role would be wider than this file says).
_UPSTREAM = "upstream's Trainer ClusterRole (config/rbac/role.yaml), shipped as upstream ships it"
_CACHED = "reads are served by the informer cache (list/watch, used); get is for uncached reads"
_WATCH_LIST = (
    "the informer reads the state as a watch-list (watch, used; docs/divergences.md F-IO-5); list is "
    "its fallback where the API server does not serve watch-lists"
)
_JOBSET_ROLE = "jobset v0.10.1's ClusterRole, which this manager's JobSet controller replaces"
EXTRA_NOT_EXERCISED: dict[tuple[str, str], str] = {
    ("batch", "jobs"): "JobSet restarts, failure and success policies delete Jobs; resume updates them",
    ("batch", "jobs/status"): "resuming a suspended JobSet clears its Jobs' startTime (status update)",
    ("", "services"): _JOBSET_ROLE + " (the headless Service is created once, deleted with the JobSet)",
    ("", "pods"): "exclusive placement deletes follower pods (trainer/controllers/jobset/pod_reconciler.py)",
    ("", "namespaces"): _JOBSET_ROLE,
    ("", "nodes"): _JOBSET_ROLE,
    ("jobset.x-k8s.io", "jobsets"): "ttlSecondsAfterFinished: a finished JobSet is deleted once it expired",
    ("jobset.x-k8s.io", "jobsets/status"): _JOBSET_ROLE,
    ("jobset.x-k8s.io", "jobsets/finalizers"): "owner references with blockOwnerDeletion on Jobs "
    "(OwnerReferencesPermissionEnforcement, where the API server enables it)",
    ("scheduling.x-k8s.io", "podgroups/status"): "the PodGroup controller (gang runtimes; none in this run)",
    ("scheduling.x-k8s.io", "elasticquotas"): "the ElasticQuota controller (no quota in this run)",
    ("scheduling.x-k8s.io", "elasticquotas/status"): "the ElasticQuota controller (no quota in this run)",
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): "the cert rotator reads and "
    "updates the JobSet configuration live; list/watch as upstream's validating-configuration grant",
    ("scheduling.k8s.io", "priorityclasses"): "the Volcano plugin and the PodGroup controller read "
    "PriorityClasses (no such runtime in this run)",
}


def upstream_grants() -> set[Grant]:
    return grants_of(["role.yaml"])


def why_not_exercised(grant: Grant, used: set[Grant]) -> str | None:
    group, resource, verb = grant
    if grant in upstream_grants():
        return _UPSTREAM
    if verb == "get" and {(group, resource, "list"), (group, resource, "watch")} & used:
        return _CACHED
    if verb == "list" and (group, resource, "watch") in used:
        return _WATCH_LIST
    return EXTRA_NOT_EXERCISED.get((group, resource))


async def _in_a_closing_namespace(env: Environment, path: str, ours: set[str]) -> bool:
    """A request into another test's namespace that is being deleted (or is gone): the
    cluster-wide manager still reconciles that test's leftovers on the shared control plane, and
    the API server's NamespaceLifecycle admission refuses their Events with a 403 that is no
    RBAC refusal."""
    parts = path.split("/")
    if "namespaces" not in parts or parts.index("namespaces") + 1 >= len(parts):
        return False
    other = parts[parts.index("namespaces") + 1]
    if other in ours:
        return False
    status, answer = await env.request("GET", f"/api/v1/namespaces/{other}")
    return status == 404 or (status == 200 and (answer.get("status") or {}).get("phase") == "Terminating")


async def ok(env: Environment, method: str, path: str, body: Any = None) -> Any:
    status, answer = await env.request(method, path, body)
    assert status in (200, 201), (method, path, status, answer)
    return answer


def grants_of(files: list[str]) -> set[Grant]:
    """(apiGroup, resource, verb) of every rule of the ClusterRoles in ``files`` of config/rbac."""
    grants: set[Grant] = set()
    for name in files:
        for doc in yaml.safe_load_all((RBAC / name).read_text()):
            if doc and doc.get("kind") == "ClusterRole":
                for rule in doc.get("rules") or []:
                    for group in rule.get("apiGroups") or []:
                        for resource in rule.get("resources") or []:
                            grants.update((group, resource, verb) for verb in rule.get("verbs") or [])
    return grants


def shipped_grants() -> set[Grant]:
    """What config/rbac binds to the manager's ServiceAccount."""
    return grants_of(["role.yaml", "role_extra.yaml", "metrics_auth_role.yaml"])


@contextlib.asynccontextmanager
async def system_objects(env: Environment, namespace: str) -> AsyncIterator[None]:
    """What config/default creates before the manager starts -- the shipped RBAC, the empty
    webhook Secret, the webhook configurations (with selectors matching nothing: the rotator
    injects its CA into them, the API server never calls them) -- and a metrics-reader binding
    for a scraper ServiceAccount of ``namespace``."""
    await env.apply(
        f"/api/v1/namespaces/{SYSTEM_NS}",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NS}},
    )
    await env.apply_manifests(
        [
            RBAC / "service_account.yaml",
            RBAC / "role.yaml",
            RBAC / "role_extra.yaml",
            RBAC / "role_binding.yaml",
            RBAC / "metrics_reader_role.yaml",
            RBAC / "metrics_auth_role.yaml",
            RBAC / "metrics_auth_role_binding.yaml",
        ]
    )
    secret_path = f"/api/v1/namespaces/{SYSTEM_NS}/secrets/{CERT_SECRET}"
    await env.request("DELETE", secret_path)  # a previous run's certificates
    await ok(
        env,
        "POST",
        f"/api/v1/namespaces/{SYSTEM_NS}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": CERT_SECRET}},
    )
    webhook_paths = []
    for name in ("trainer.yaml", "jobset.yaml"):
        for doc in yaml.safe_load_all((ROOT / "config" / "webhook" / name).read_text()):
            if not doc:
                continue
            for hook in doc["webhooks"]:
                hook["namespaceSelector"] = NEVER
                hook["objectSelector"] = NEVER
            path = f"/apis/admissionregistration.k8s.io/v1/{doc['kind'].lower()}s/{doc['metadata']['name']}"
            await env.apply(path, doc)
            webhook_paths.append(path)
    binding = f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{READER_BINDING}"
    reader_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": READER_BINDING},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "kubeflow-trainer-metrics-reader",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
    }
    await env.apply(binding, reader_binding)
    await env.wait_binding_effective(reader_binding)
    try:
        yield
    finally:
        for path in [*webhook_paths, binding, secret_path]:
            await env.request("DELETE", path)


@contextlib.asynccontextmanager
async def serving_webhooks(
    env: Environment, namespace: str, tmp_path: Path, manager: RunningManager
) -> AsyncIterator[None]:
    """The shipped webhooks for ``namespace``, served by ``manager``, under names of their own.

    The API server reaches the manager at 127.0.0.1, so the serving certificate in the cert dir
    is the test's (for that address, from ``running_manager``), not the rotator's (for the
    Service's DNS name, which does not resolve here); the rotator keeps injecting its CA into
    the shipped configurations of ``system_objects``, these carry the test's CA."""
    docs = webhook_configurations(namespace)
    for doc in docs:
        doc["metadata"]["name"] += "-security-test"
    (tmp_path / "webhooks.yaml").write_text(yaml.safe_dump_all(docs))
    await env.install_webhooks(
        [tmp_path / "webhooks.yaml"],
        host="127.0.0.1",
        port=manager.webhook_port,
        ca_bundle=manager.ca.cert_pem,
    )
    try:
        # the run covers what the webhooks do: create nothing before the API server calls them
        await wait_webhooks_effective(env, docs, namespace)
        yield
    finally:
        for doc in docs:
            await env.request(
                "DELETE",
                f"/apis/admissionregistration.k8s.io/v1/{doc['kind'].lower()}s/{doc['metadata']['name']}",
            )


def trainjob(name: str, runtime: str) -> Json:
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {
                "name": runtime,
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
            },
            "trainer": {"numNodes": 2},
        },
    }


def plain_jobset() -> Json:
    pod_spec = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "plain"},
        "spec": {
            "replicatedJobs": [
                {"name": "w", "replicas": 2, "template": {"spec": {"template": {"spec": pod_spec}}}}
            ]
        },
    }


async def scrape(port: int, token: str) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # the self-signed metrics cert
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"https://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}, ssl=ctx
        ) as r,
    ):
        text = await r.text()
        assert r.status == 200, (r.status, text[:300])
        return text


async def test_mpi_run_at_debug_level_uses_only_the_shipped_rbac_and_leaks_no_secret(
    control_plane: Environment, namespace: str, tmp_path: Path
) -> None:
    env = control_plane
    await env.apply_manifests(
        [
            ROOT / "config" / "runtimes" / "torch-distributed.yaml",
            ROOT / "config" / "runtimes" / "deepspeed-distributed.yaml",
        ]
    )
    metrics_port = free_port()
    ns_api = f"/api/v1/namespaces/{namespace}"
    async with system_objects(env, namespace):
        token = await env.service_account_token(SYSTEM_NS, MANAGER_SA)
        scraper_token = await env.service_account_token(namespace, "prometheus")
        async with (
            RecordingProxy(env, tmp_path) as proxy,
            running_manager(
                env,
                tmp_path,
                {
                    "certManagement": {"enable": True},
                    "leaderElection": {"leaderElect": True, "resourceNamespace": SYSTEM_NS},
                    "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": True},
                },
                args=[f"--kubeconfig={proxy.kubeconfig(token)}", "--zap-log-level=debug"],
                ready_timeout=120,
            ) as manager,
            serving_webhooks(env, namespace, tmp_path, manager),
        ):

            async def rotated() -> Json:
                secret: Json = await ok(env, "GET", f"/api/v1/namespaces/{SYSTEM_NS}/secrets/{CERT_SECRET}")
                assert (secret.get("data") or {}).get("tls.key"), "the rotator has not filled the Secret"
                return secret

            webhook_secret = await eventually(rotated, timeout=30)

            await ok(
                env,
                "POST",
                f"/apis/{TRAINER}/namespaces/{namespace}/trainjobs",
                trainjob("torch", "torch-distributed"),
            )
            await ok(
                env,
                "POST",
                f"/apis/{TRAINER}/namespaces/{namespace}/trainjobs",
                trainjob("mpi", "deepspeed-distributed"),
            )
            await ok(
                env, "POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets", plain_jobset()
            )

            async def reconciled() -> Json:
                for name in ("torch", "mpi", "plain"):
                    status, _ = await env.request(
                        "GET", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{name}"
                    )
                    assert status == 200, f"no JobSet {name}"
                jobs = (await ok(env, "GET", f"/apis/batch/v1/namespaces/{namespace}/jobs"))["items"]
                # torch: node x1; mpi: launcher + node; plain: w x2
                assert len(jobs) >= 5, sorted(j["metadata"]["name"] for j in jobs)
                status, hostfile = await env.request("GET", f"{ns_api}/configmaps/mpi-mpi-hostfile")
                assert status == 200, "no hostfile ConfigMap"
                assert "slots=" in hostfile["data"]["hostfile"], hostfile
                status, secret = await env.request("GET", f"{ns_api}/secrets/mpi-mpi-ssh-auth")
                assert status == 200, "no SSH Secret"
                return dict(secret)

            try:
                ssh_secret = await eventually(reconciled, timeout=90)
            except AssertionError:
                print("requests >= 400:", [r for r in proxy.requests if r.status >= 400][:20])
                print("pending:", [p for p in proxy.pending.values() if "watch=" not in p])
                raise
            await scrape(metrics_port, scraper_token)

            # the MPI SSH Secret is immutable: created so, and a change of its data refused
            assert ssh_secret.get("immutable") is True, ssh_secret.get("immutable")
            assert ssh_secret["type"] == "kubernetes.io/ssh-auth"
            assert set(ssh_secret["data"]) == {"ssh-privatekey", "ssh-publickey"}
            changed = {
                **ssh_secret,
                "data": {**ssh_secret["data"], "ssh-privatekey": base64.b64encode(b"x").decode()},
            }
            status, answer = await env.request("PUT", f"{ns_api}/secrets/mpi-mpi-ssh-auth", changed)
            assert status == 422 and "field is immutable" in answer["message"], (status, answer)
            status, answer = await env.request(
                "PATCH",
                f"{ns_api}/secrets/mpi-mpi-ssh-auth",
                {"data": {"extra": base64.b64encode(b"y").decode()}},
                content_type="application/merge-patch+json",
            )
            assert status == 422 and "field is immutable" in answer["message"], (status, answer)
            stored = await ok(env, "GET", f"{ns_api}/secrets/mpi-mpi-ssh-auth")
            assert stored["data"] == ssh_secret["data"]

            events = [
                *(await ok(env, "GET", f"{ns_api}/events"))["items"],
                *(await ok(env, "GET", f"/api/v1/namespaces/{SYSTEM_NS}/events"))["items"],
            ]
            events_v1 = (await ok(env, "GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"))[
                "items"
            ]
    log = manager.log_path.read_text(errors="replace")

    # -- the manager did all its work with the shipped RBAC, and needed all of it
    refused = [r for r in proxy.requests if r.status in (401, 403)]
    refused = [r for r in refused if not await _in_a_closing_namespace(env, r.path, {namespace, SYSTEM_NS})]
    assert not refused, [(r.method, r.path, r.status) for r in refused]
    used = {(g, r, v) for (g, r), verbs in verbs_used(proxy.requests).items() for v in verbs}
    granted = shipped_grants()
    assert not sorted(used - granted), f"used but not granted by config/rbac: {sorted(used - granted)}"
    unused = sorted(granted - used)
    unexplained = [g for g in unused if why_not_exercised(g, used) is None]
    print(f"\nRBAC: {len(granted)} grants, {len(used)} used, {len(unused)} not exercised (justified)")
    print("RBAC used:", sorted(used))
    assert not unexplained, f"granted by config/rbac, never used, not justified: {unexplained}"

    # -- no secret material in the debug log or in any event
    assert '"level":"debug"' in log, "the manager did not log at debug level"
    assert '"name":"mpi"' in log and namespace in log, "the MPI TrainJob's reconciles are not in the log"
    secrets: dict[str, list[str]] = {
        "SSH private key": private_key_forms(base64.b64decode(ssh_secret["data"]["ssh-privatekey"])),
        "manager token": token_forms(token),
        "scraper token": token_forms(scraper_token),
    }
    for key, value in webhook_secret["data"].items():
        if key.endswith(".key"):
            secrets[f"webhook Secret {key}"] = private_key_forms(base64.b64decode(value))
    secrets["serving key in the cert dir"] = private_key_forms((tmp_path / "tls.key").read_bytes())
    for where, text in {"manager log": log, "events": json.dumps([*events, *events_v1])}.items():
        found = leaks(text, secrets)
        assert not found, f"{where}: {found}"
