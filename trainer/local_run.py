"""``make run``: the manager on a local control plane, or on ``$KUBECONFIG`` when it is set.

With no ``KUBECONFIG`` a full local cluster is started in ``--dir`` (or one already running there
from ``make cluster-up`` is reused). Then, as a deployment would, the CRDs, the webhook
configurations (pointed at this process on 127.0.0.1 with a locally generated CA, as envtest
does, since the cluster cannot reach a Service here) and the shipped runtimes are installed, and
the manager runs in the foreground. Ctrl-C stops the manager; a cluster this command started is
stopped too, one it reused is left running.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.environment import STATE_FILE
from manager.envtest.process import pid_alive, signal_on_parent_death

ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = ROOT / "config" / "crd"
WEBHOOK_DIR = ROOT / "config" / "webhook"
RUNTIMES_DIR = ROOT / "config" / "runtimes"
WEBHOOK_PORT = 9443


def _running_cluster(directory: Path) -> bool:
    state = directory / STATE_FILE
    if not state.exists():
        return False
    info = json.loads(state.read_text())
    return bool(info["processes"]) and all(pid_alive(p["pid"]) for p in info["processes"])


def _manifests(directory: Path) -> list[Path]:
    return [directory] if directory.is_dir() and any(directory.rglob("*.yaml")) else []


def _say(message: str) -> None:
    print(f"make run: {message}", file=sys.stderr, flush=True)


def write_local_config(directory: Path) -> tuple[Path, Path, bytes]:
    """A Configuration for a manager outside the cluster, and its webhook serving certificate."""
    cert_dir = directory / "webhook-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = TinyCA("trainer-local-webhook-ca")
    ca.issue_server("localhost", ips=["127.0.0.1"], dns=["localhost"]).write(
        cert_dir / "tls.crt", cert_dir / "tls.key"
    )
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {"host": "127.0.0.1", "port": WEBHOOK_PORT},
        "metrics": {"bindAddress": "127.0.0.1:8443", "secureServing": False},
        "health": {"healthProbeBindAddress": "127.0.0.1:8081"},
        # The cluster cannot reach a Service here: certificates are local files instead.
        "certManagement": {"enable": False},
    }
    path = directory / "manager-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, cert_dir, ca.cert_pem


def _runtime_files() -> list[Path]:
    """The shipped runtimes, without kustomize's own files (not Kubernetes objects)."""
    return sorted(p for p in RUNTIMES_DIR.rglob("*.yaml") if p.name != "kustomization.yaml")


async def _remove_webhook_configurations(env: Environment, hooks: list[Path]) -> None:
    """A configuration left by an earlier run points at a manager that is not running yet."""
    for doc in yaml.safe_load_all(
        "\n---\n".join(p.read_text() for d in hooks for p in sorted(d.rglob("*.yaml")))
    ):
        kind = doc.get("kind", "") if isinstance(doc, dict) else ""
        if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            plural = kind.lower() + "s"
            name = doc["metadata"]["name"]
            await env.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")


async def install(env: Environment, ca_pem: bytes) -> None:
    """CRDs, then the runtimes (before the webhooks: no manager answers them yet), then the webhooks."""
    if crds := _manifests(CRD_DIR):
        _say(f"installed {len(await env.install_crds(crds))} CRDs")
    hooks = _manifests(WEBHOOK_DIR)
    await _remove_webhook_configurations(env, hooks)
    if runtimes := _runtime_files():
        _say(f"installed runtimes {await env.apply_manifests(runtimes, field_manager='make-run')}")
    if hooks:
        names = await env.install_webhooks(hooks, host="127.0.0.1", port=WEBHOOK_PORT, ca_bundle=ca_pem)
        _say(f"installed webhook configurations {names} -> https://127.0.0.1:{WEBHOOK_PORT}")


def run_manager(kubeconfig: Path, args: list[str]) -> int:
    argv = [sys.executable, "-m", "trainer", f"--kubeconfig={kubeconfig}", "--log-format=console", *args]
    manager = subprocess.Popen(argv, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    try:
        return manager.wait()
    except KeyboardInterrupt:
        # The terminal sent SIGINT to the whole foreground group; wait for the graceful stop.
        manager.send_signal(signal.SIGINT)
        return manager.wait()


def _terminate(_signum: int, _frame: object) -> None:
    # SIGTERM takes the Ctrl-C path: the manager stops gracefully, then the cluster.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    # `make` does not pass a SIGINT it gets alone (e.g. from `timeout`) to its child: stop when
    # it dies rather than keep a cluster running for nobody.
    signal_on_parent_death(signal.SIGTERM)
    parser = argparse.ArgumentParser(prog="make run", description=__doc__)
    parser.add_argument("--dir", default=".local/cluster", help="where the local cluster lives")
    parser.add_argument("--nodes", type=int, default=2, help="fake KWOK nodes")
    args, manager_args = parser.parse_known_args(argv)

    if kubeconfig := os.environ.get("KUBECONFIG"):
        _say(f"running against KUBECONFIG={kubeconfig}")
        return run_manager(Path(kubeconfig), manager_args)

    directory = Path(args.dir).resolve()
    started_here = not _running_cluster(directory)
    if started_here:
        _say(f"starting a full local cluster in {directory} ...")
        env = Environment(directory, full=True, nodes=args.nodes, keep_dir=False)
        asyncio.run(env.start())
    else:
        _say(f"reusing the local cluster in {directory}")
        env = Environment.attach(directory)
    try:
        config, cert_dir, ca_pem = write_local_config(directory)
        asyncio.run(install(env, ca_pem))
        _say(f"cluster ready; in another shell: export KUBECONFIG={env.kubeconfig}")
        return run_manager(
            env.kubeconfig, [f"--config={config}", f"--webhook-cert-dir={cert_dir}", *manager_args]
        )
    finally:
        if started_here:
            asyncio.run(env.stop())
            _say("local cluster stopped")


if __name__ == "__main__":
    sys.exit(main())
