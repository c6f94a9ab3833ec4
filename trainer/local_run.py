"""``make run``: the manager outside the cluster, on a local control plane or on ``$KUBECONFIG``.

With no ``KUBECONFIG`` a full local cluster is started in ``--dir`` (or one already running there
from ``make cluster-up`` is reused) and the webhooks are registered at ``https://127.0.0.1``.
With ``KUBECONFIG`` set (kind, or any cluster) that cluster is used, and the webhooks are
registered at ``https://$WEBHOOK_HOST:$WEBHOOK_PORT`` when the user names an address the API
server can reach (for kind, the gateway of its Docker network), or not at all when none is
named: the controllers run, and the API server calls no webhook.

``--level`` (``make run LEVEL=v2.3``; default the default API level, docs/levels.md) picks the
API level: its manifests (``ApiLevel.local_manifests``) are installed and the manager is started
with ``--api-level=<level>``.

Either way what a deployment would do happens first: the CRDs and shipped runtimes are
installed by the code of ``make install`` (``trainer.install``), certificate management is off
(there is no Secret mount outside a Pod) and a serving certificate is generated locally, its CA
put into the webhook configurations. Then the manager runs in the foreground. Ctrl-C stops it;
the webhook configurations this command registered are removed again (they would refuse every
request once nothing serves them), a cluster this command started is stopped, one it reused is
left running.

Exit codes: 0 after a clean stop; 1 when the cluster could not be prepared or the manager
failed (its exit code); 3 when the manager stopped but the webhook configurations this run
registered could not be removed, e.g. because the cluster or its kubeconfig was gone by then:
one line says which and why (``make uninstall`` removes them once the cluster is back).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from manager.client.errors import RequestError
from manager.cluster import Cluster
from manager.config import RestConfigError, load_kubeconfig
from manager.envtest import Environment
from manager.envtest.certs import TinyCA
from manager.envtest.environment import STATE_FILE
from manager.envtest.process import pid_alive, signal_on_parent_death
from manager.longrun import describe
from trainer import install as installer
from trainer import levels
from trainer.levels import ApiLevel

WEBHOOK_PORT = 9443
METRICS_PORT = 8443
HEALTH_PORT = 8081
#: Exit code when the manager stopped but the webhook configurations could not be removed.
EXIT_WEBHOOKS_LEFT = 3
#: How long the removal may try to reach the API server before it gives up (a cluster that is
#: gone is not waited for past this).
UNREGISTER_TIMEOUT = 15.0


def _running_cluster(directory: Path) -> bool:
    state = directory / STATE_FILE
    if not state.exists():
        return False
    info = json.loads(state.read_text())
    return bool(info["processes"]) and all(pid_alive(p["pid"]) for p in info["processes"])


def _say(message: str) -> None:
    print(f"make run: {message}", file=sys.stderr, flush=True)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def write_local_config(
    directory: Path,
    *,
    webhook_host: str = "",
    webhook_port: int = WEBHOOK_PORT,
    metrics_port: int = METRICS_PORT,
    health_port: int = HEALTH_PORT,
) -> tuple[Path, Path, bytes]:
    """A Configuration for a manager outside the cluster, and its webhook serving certificate.

    The certificate names 127.0.0.1, localhost and ``webhook_host``; the webhook server listens on
    ``webhook_host`` when it is an IP address, on every address when it is a DNS name, and on
    loopback when none is named.
    """
    cert_dir = directory / "webhook-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ips, dns = ["127.0.0.1"], ["localhost"]
    if webhook_host:
        (ips if _is_ip(webhook_host) else dns).append(webhook_host)
    ca = TinyCA("trainer-local-webhook-ca")
    ca.issue_server(webhook_host or "localhost", ips=sorted(set(ips)), dns=sorted(set(dns))).write(
        cert_dir / "tls.crt", cert_dir / "tls.key"
    )
    bind = (webhook_host if _is_ip(webhook_host) else "0.0.0.0") if webhook_host else "127.0.0.1"
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {"host": bind, "port": webhook_port},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        # No Secret is mounted outside a Pod: the certificate above is used instead.
        "certManagement": {"enable": False},
    }
    path = directory / "manager-config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, cert_dir, ca.cert_pem


async def prepare(
    kubeconfig: Path,
    *,
    webhook_host: str,
    webhook_port: int,
    ca_pem: bytes,
    level: ApiLevel = levels.DEFAULT,
) -> list[str]:
    """Install as ``make install`` does at ``level``, then register the webhooks (or say why not).

    Returns the webhook configurations registered, for :func:`unregister`.
    """
    docs = installer.render(installer.local_dir(level))
    _crds, _objects, hooks = installer.split(docs)
    async with Cluster(await load_kubeconfig(kubeconfig), field_owner=installer.FIELD_MANAGER) as cluster:
        client = cluster.api_reader
        # A configuration left by an earlier run calls a manager that is not running yet: the
        # runtimes could not be applied through it.
        if stale := await installer.remove_run_webhooks(client, hooks):
            _say(f"removed webhook configurations of an earlier run: {', '.join(stale)}")
        applied = await installer.install(client, docs)
        _say(f"installed {len(applied)} CRDs, runtimes and objects of level {level.name} (as make install)")
        if not webhook_host:
            _say(
                "webhooks are not registered: no WEBHOOK_HOST named, so the API server calls no "
                "webhook of this manager (set WEBHOOK_HOST to an address the cluster reaches, "
                "e.g. the kind network gateway)"
            )
            return []
        names = await installer.register_webhooks(
            client, hooks, host=webhook_host, port=webhook_port, ca_pem=ca_pem
        )
        url = f"https://{installer.url_host(webhook_host)}:{webhook_port}"
        _say(f"webhooks registered at {url}: {', '.join(names)}")
        return names


class ClusterGone(Exception):
    """The cluster of the kubeconfig cannot be reached any more (or the kubeconfig is gone)."""


async def unregister(kubeconfig: Path, level: ApiLevel = levels.DEFAULT) -> list[str]:
    """Remove the configurations a ``make run`` registered; ``ClusterGone`` at once when the
    kubeconfig is gone or nothing listens at its API server's address (no retries for minutes)."""
    if not await asyncio.to_thread(kubeconfig.is_file):
        raise ClusterGone(f"the kubeconfig {kubeconfig} is gone")
    config = await load_kubeconfig(kubeconfig)
    address = urlsplit(config.host)
    try:
        _reader, writer = await asyncio.wait_for(
            asyncio.open_connection(address.hostname, address.port or 443), 5
        )
        writer.close()
    except (OSError, TimeoutError) as err:
        raise ClusterGone(f"the API server at {config.host} does not answer ({describe(err)})") from err
    _crds, _objects, hooks = installer.split(installer.render(installer.local_dir(level)))
    async with Cluster(config, field_owner=installer.FIELD_MANAGER) as cluster:
        return await installer.remove_run_webhooks(cluster.api_reader, hooks)


def _why(err: BaseException, kubeconfig: Path) -> str:
    if isinstance(err, ClusterGone):
        return str(err)
    if isinstance(err, TimeoutError) and not str(err):
        return f"the API server of {kubeconfig} did not answer within {UNREGISTER_TIMEOUT:g}s"
    if isinstance(err, KeyboardInterrupt):
        return "interrupted"
    return describe(err)


def remove_registered(kubeconfig: Path, registered: list[str], level: ApiLevel = levels.DEFAULT) -> bool:
    """Remove the webhook configurations this run registered; False (said in one line) when
    that failed: the cluster, or its kubeconfig, may be gone by now."""
    try:
        asyncio.run(asyncio.wait_for(unregister(kubeconfig, level), UNREGISTER_TIMEOUT))
    except (Exception, KeyboardInterrupt) as err:  # at exit, whatever it is: one line, no traceback
        _say(
            f"could not remove the webhook configurations registered by this run "
            f"({', '.join(registered)}): {_why(err, kubeconfig)}; `make uninstall` removes them "
            "once the cluster is back"
        )
        return False
    _say(f"removed the webhook configurations registered by this run: {', '.join(registered)}")
    return True


def _manager_preexec() -> None:
    # Stopped gracefully if this process dies without stopping it (e.g. SIGKILL).
    signal_on_parent_death(signal.SIGTERM)


def run_manager(kubeconfig: Path, args: list[str]) -> int:
    """Run the manager in the foreground until it exits or this process is interrupted.

    The manager gets its own process group: a Ctrl-C reaches it once, forwarded from here (a
    second signal would make it exit at once instead of stopping gracefully).
    """
    argv = [sys.executable, "-m", "trainer", f"--kubeconfig={kubeconfig}", "--log-format=console", *args]
    manager = subprocess.Popen(
        argv,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        process_group=0,
        preexec_fn=_manager_preexec,
    )
    try:
        return manager.wait()
    except KeyboardInterrupt:
        manager.send_signal(signal.SIGINT)
        while True:
            try:
                return manager.wait()
            except KeyboardInterrupt:  # an impatient second Ctrl-C: stop at once
                manager.send_signal(signal.SIGINT)


def _terminate(_signum: int, _frame: object) -> None:
    # SIGTERM takes the Ctrl-C path: the manager stops gracefully, then the cluster.
    raise KeyboardInterrupt


def run_on(kubeconfig: Path, directory: Path, args: argparse.Namespace, manager_args: list[str]) -> int:
    """Prepare the cluster, run the manager at the level of ``args.level``, remove the webhooks
    registered here."""
    level = levels.get(args.level)
    config, cert_dir, ca_pem = write_local_config(
        directory,
        webhook_host=args.webhook_host,
        webhook_port=args.webhook_port,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
    )
    try:
        registered = asyncio.run(
            prepare(
                kubeconfig,
                webhook_host=args.webhook_host,
                webhook_port=args.webhook_port,
                ca_pem=ca_pem,
                level=level,
            )
        )
    except (installer.InstallError, RequestError, RestConfigError) as err:
        _say(f"cannot prepare the cluster: {err}")
        return 1
    _say(f"cluster ready; in another shell: export KUBECONFIG={kubeconfig}")
    removed = True
    try:
        code = run_manager(
            kubeconfig,
            [
                f"--config={config}",
                f"--webhook-cert-dir={cert_dir}",
                f"--api-level={level.name}",
                *manager_args,
            ],
        )
    finally:
        if registered:
            removed = remove_registered(kubeconfig, registered, level)
    return code if removed else EXIT_WEBHOOKS_LEFT


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    # `make` does not pass a SIGINT it gets alone (e.g. from `timeout`) to its child: stop when
    # it dies rather than keep a cluster running for nobody.
    signal_on_parent_death(signal.SIGTERM)
    parser = argparse.ArgumentParser(
        prog="make run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dir", default=".local/cluster", help="where the local cluster (and run state) lives"
    )
    parser.add_argument("--nodes", type=int, default=2, help="fake KWOK nodes")
    parser.add_argument(
        "--level",
        default=levels.DEFAULT.name,
        choices=sorted(levels.LEVELS),
        help=f"the API level to install and run at (default {levels.DEFAULT.name}; docs/levels.md)",
    )
    parser.add_argument(
        "--webhook-host",
        default=os.environ.get("WEBHOOK_HOST", ""),
        help="with KUBECONFIG: the address the API server calls the webhooks at (default $WEBHOOK_HOST; "
        "empty: webhooks are not registered)",
    )
    parser.add_argument("--webhook-port", type=int, default=WEBHOOK_PORT)
    parser.add_argument("--metrics-port", type=int, default=METRICS_PORT)
    parser.add_argument("--health-port", type=int, default=HEALTH_PORT)
    args, manager_args = parser.parse_known_args(argv)

    if kubeconfig := os.environ.get("KUBECONFIG"):
        path = Path(kubeconfig.split(os.pathsep)[0])
        _say(f"running against KUBECONFIG={path}")
        return run_on(path, Path(args.dir).resolve(), args, manager_args)

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
        # The local API server runs on this machine: it reaches the webhooks on loopback.
        args.webhook_host = "127.0.0.1"
        return run_on(env.kubeconfig, directory, args, manager_args)
    finally:
        if started_here:
            asyncio.run(env.stop())
            _say("local cluster stopped")


if __name__ == "__main__":
    sys.exit(main())
