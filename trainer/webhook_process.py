"""The admission webhooks in a process of their own (``--webhook-process``, the default).

The manager's process runs the controllers and starts the child (``child_command``): the same
command line, ``--controllers`` naming the components that registered, and the child's socket
ends (``manager.webhook.process``). The child (``run_child``) registers those components'
webhooks and nothing else, and serves them: no leader election (webhooks answer on every
replica), no metrics or probe server (the manager's process relays the webhook metrics and its
readiness waits for the child's server), a cache of what the webhooks read (the runtimes, the
Pods of JobSets cut to name, owner and node, Nodes' labels). Why a process: docs/behaviour/framework.md D.13.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence

import structlog

from manager import Manager, Options
from manager.cache.cache import Cache
from manager.cluster import Cluster
from manager.config import RestConfigError, get_config
from manager.manager.signals import run_until_signalled
from manager.meta.gvk import POD
from manager.metrics.webhook import RELAYED
from manager.webhook.pressure import AdmissionPressure
from manager.webhook.process import ParentLink
from manager.webhook.server import WebhookServer
from trainer.api import gocodec
from trainer.api.config_v1alpha1 import Configuration
from trainer.components import select
from trainer.jobset.placement import PLACEMENT_POD_CACHE, cache_placement_reads
from trainer.levels import ApiLevel
from trainer.options import apply_client_connection, webhook_address
from trainer.runtime.context import SetupContext

__all__ = ["child_command", "parse_fds", "run_child", "webhook_server"]

log = structlog.get_logger("setup")


def webhook_server(
    args: argparse.Namespace,
    cfg: Configuration,
    options: Options,
    level: ApiLevel,
    *,
    own_thread: bool = True,
    pressure: AdmissionPressure | None = None,
) -> WebhookServer:
    """The webhook server the Configuration describes (in either process)."""
    host, port = webhook_address(cfg)
    return WebhookServer(
        host=host,
        port=port,
        cert_dir=args.webhook_cert_dir,
        # the Configuration's tls, as for the metrics server (upstream's one tlsOpts for both)
        tls_opts=options.metrics_tls_opts,
        # the level's Go managers' JSON decoder names embedded fields in a type error's path
        embedded_in_error_path=gocodec.names_embedded_fields(level.runtime.trainer_go_types),
        own_thread=own_thread,
        pressure=pressure,
    )


def child_command(argv: Sequence[str], enabled: Sequence[str]) -> list[str]:
    """The child's command: this program, its flags, the components whose webhooks it serves."""
    return [sys.executable, "-m", "trainer", *argv, "--controllers", ",".join(enabled)]


def parse_fds(value: str) -> tuple[tuple[int, int], int | None]:
    """The child's two socket ends and its admission pressure word: ``a,b[,c]``."""
    fds = [int(fd) for fd in value.split(",")]
    return (fds[0], fds[1]), (fds[2] if len(fds) > 2 else None)


async def run_child(
    args: argparse.Namespace,
    cfg: Configuration,
    options: Options,
    level: ApiLevel,
    fds: tuple[int, int],
    pressure_fd: int | None = None,
) -> int:
    """Serve the webhooks of ``--controllers``' components until SIGTERM or the parent's end."""
    try:
        rest = await get_config(args.kubeconfig or None)
    except RestConfigError as err:
        log.error("webhook process: unable to get kubeconfig", error=str(err))
        return 1
    apply_client_connection(rest, cfg)
    child = dataclasses.replace(
        options,
        leader_election=False,
        metrics_bind_address="0",
        health_probe_bind_address="",
        debug_bind_address="",
        metrics_filter_provider=None,
    )
    async with Cluster(rest) as cluster:
        mgr = Manager(cluster, child)
        # the webhooks read a leader Pod's name, owner and node only, whatever the manager's
        # podCache (which the manager logs)
        if isinstance(mgr.cache, Cache):
            mgr.cache.options.by_object[POD] = PLACEMENT_POD_CACHE
        pressure = AdmissionPressure(pressure_fd) if pressure_fd is not None else None
        server = webhook_server(args, cfg, options, level, own_thread=False, pressure=pressure)
        context = SetupContext(mgr, server, level=level.runtime, jobset_level=level.jobset)
        components = select(args.controllers)
        if any(c.name == "jobset" for c in components):
            await cache_placement_reads(mgr.cache)
        for component in components:
            await component.webhooks(context)
        mgr.add_webhook_server(ParentLink(server, fds, mgr.stop, RELAYED))
        log.info("webhook process starting", components=[c.name for c in components], paths=server.paths)
        try:
            return await run_until_signalled(mgr)
        finally:
            if pressure is not None:
                pressure.close()
