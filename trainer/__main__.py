"""``trainer-controller-manager`` (``python -m trainer``): the product's entry point.

The composition root: reads the Configuration file (strictly, as upstream; ``trainer.options``
turns it into options), builds the manager (metrics, probes, leader election, webhook server)
and one ``SetupContext``, hands it to every enabled component of ``trainer.components``, then
runs until SIGTERM/SIGINT. Exit codes: 0 after a graceful stop,
1 on bad configuration, a lost lease or a failed runnable.
"""

from __future__ import annotations

if __name__ == "__main__":  # python -m trainer: signals kept from the first line (early_signals)
    from trainer import early_signals

    early_signals.defer()

import argparse
import contextlib
import dataclasses
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from manager import Manager, Options, loops
from manager import log as mlog
from manager.client.errors import Forbidden, RequestError
from manager.cluster import Cluster
from manager.config import RestConfig, RestConfigError, get_config
from manager.health.checks import CheckFailedError, flag_checker, ping
from manager.manager.signals import run_until_signalled
from manager.meta.field import aggregate
from manager.metrics.registry import REGISTRY
from manager.metrics.webhook import RELAYED
from manager.webhook.pressure import DEFAULT_MAX_WAIT, AdmissionPressure
from manager.webhook.process import CHILD_FDS_FLAG, WebhookProcess, relay_metrics
from manager.webhook.server import DEFAULT_CERT_DIR, WebhookServer
from trainer import early_signals, features
from trainer.api.config_v1alpha1 import Configuration, ConfigurationError
from trainer.components import COMPONENTS, Component, select
from trainer.controllers import podcache
from trainer.levels import DEFAULT as DEFAULT_LEVEL
from trainer.levels import LEVELS, ApiLevel, CrdLevelMismatch
from trainer.levels import get as api_level
from trainer.levels.check import check_trainjob_crd, feature_gate_errors
from trainer.options import apply_client_connection, manager_options, read_configuration
from trainer.runtime.context import SetupContext
from trainer.runtime.plugins import builtin_names as builtin_plugin_names
from trainer.runtime.plugins import external as external_plugins
from trainer.webhook_process import child_command, parse_fds, run_child, webhook_server
from webhooks.certs import TRAINER_WEBHOOK_CONFIGURATIONS, CertConfig, CertRotator, WebhookConfiguration

FIELD_OWNER = "trainer"
# upstream's main sets zap's TimeEncoder to RFC3339Nano (controller-runtime's own default is RFC3339)
DEFAULT_TIME_ENCODING: mlog.TimeEncoding = "rfc3339nano"
log = mlog.get_logger("setup")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trainer-controller-manager", description=__doc__)
    parser.add_argument("--config", default="", help="path of a Configuration file (empty: defaults)")
    parser.add_argument("--kubeconfig", default="", help="kubeconfig path (default: KUBECONFIG, in-cluster)")
    parser.add_argument(
        "--enable-http2", action="store_true", help="accepted for parity; HTTP/2 is never served"
    )
    mlog.bind_flags(parser, time_encoding=DEFAULT_TIME_ENCODING)
    parser.add_argument(
        "--controllers",
        default="*",
        help="controllers to run: '*' for all, 'name' to enable, '-name' to disable "
        f"(known: {', '.join(c.name for c in COMPONENTS) or 'none yet'})",
    )
    parser.add_argument(
        "--webhook-cert-dir",
        default=str(DEFAULT_CERT_DIR),
        help="directory with tls.crt/tls.key for the webhook server when certManagement is off",
    )
    parser.add_argument(
        "--api-level",
        default="",
        help="the upstream line to speak, overriding the Configuration's apiLevel "
        f"({', '.join(LEVELS)}; default {DEFAULT_LEVEL.name}; docs/levels.md)",
    )
    parser.add_argument(
        "--webhook-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve the admission webhooks from a child process of their own (the default: answers "
        "never wait for the reconciles' interpreter lock); --no-webhook-process serves them on a "
        "thread of this process",
    )
    parser.add_argument(
        "--yield-to-admission",
        type=float,
        default=DEFAULT_MAX_WAIT,
        metavar="SECONDS",
        help="while admission is under load (a burst of creates), each reconcile first waits for it "
        f"to pass, at most this long (default {DEFAULT_MAX_WAIT:g}; 0: never waits; "
        "docs/behaviour/framework.md D.14)",
    )
    parser.add_argument(CHILD_FDS_FLAG, default="", help=argparse.SUPPRESS)
    parser.add_argument(
        "--feature-gates",
        default="",
        help="comma-separated Name=true|false pairs; override the Configuration's featureGates",
    )
    return parser.parse_args(argv)


def serve_webhooks(
    mgr: Manager,
    webhooks: WebhookServer | WebhookProcess,
    cfg: Configuration,
    configurations: tuple[WebhookConfiguration, ...] = TRAINER_WEBHOOK_CONFIGURATIONS,
    also: tuple[Any, ...] = (),
) -> None:
    """Serve the webhooks; with certManagement on, only once the rotator has certificates ready.

    ``configurations`` are the webhook configurations of the components that run: the rotator
    injects its CA into each of them before the certificates count as ready. ``also`` are servers
    on the same certificates (the TrainJob status server), started with the webhook server.

    Readiness fails with ``certificates are not ready`` until then (upstream's readyz), and
    afterwards with ``webhook server has not started`` until the server listens.
    """
    certs = cfg.cert_management
    started = flag_checker(webhooks.started_checker(), "webhook server has not started")
    if certs is None or not certs.enable:
        mgr.add_webhook_server(webhooks)
        for server in also:
            mgr.add(server)
        mgr.add_readyz_check("webhook", started)
        return
    rotator = CertRotator(
        mgr.api_reader,
        CertConfig(
            secret_name=certs.webhook_secret_name or CertConfig.secret_name,
            service_name=certs.webhook_service_name or CertConfig.service_name,
            cert_dir=webhooks.cert_dir,
            webhook_configurations=configurations,
        ),
    )
    rotator.on_ready(lambda: mgr.add_webhook_server(webhooks))

    def add_also() -> None:  # servers on the same certificates (the TrainJob status server)
        for server in also:
            mgr.add(server)

    rotator.on_ready(add_also)
    mgr.add(rotator)
    server_started = webhooks.started_checker()

    def ready() -> None:
        if not rotator.is_ready():
            raise CheckFailedError("certificates are not ready")
        if not server_started():
            raise CheckFailedError("webhook server has not started")

    mgr.add_readyz_check("webhook", ready)


def status_server(
    mgr: Manager,
    webhooks: WebhookServer | None,
    cfg: Configuration,
    enabled: list[str],
    level: ApiLevel = DEFAULT_LEVEL,
) -> tuple[Any, ...]:
    """With the TrainJobStatus gate on (and the trainer component running): the status server of
    the level's module (``ApiLevel.status_server``)."""
    if not features.enabled(features.TrainJobStatus) or webhooks is None or "trainer" not in enabled:
        return ()
    from trainer.api.config_v1alpha1 import status_server_defaults
    from trainer.runtime.plugins import trainjobstatus
    from webhooks.certs import service_namespace

    setup_status_server = importlib.import_module(level.status_server).setup_status_server

    settings = status_server_defaults(cfg)
    certs = cfg.cert_management
    trainjobstatus.configure(
        trainjobstatus.StatusServerSettings(
            service_name=(certs.webhook_service_name if certs else None) or CertConfig.service_name,
            namespace=service_namespace(),
            port=int(settings.port or 10443),
            secret_name=(certs.webhook_secret_name if certs else None) or CertConfig.secret_name,
        )
    )
    server = setup_status_server(
        mgr,
        port=int(settings.port or 10443),
        qps=float(settings.qps or 0),
        burst=int(settings.burst or 0),
        cert_dir=webhooks.cert_dir,
        host=webhooks.host,
        tls_opts=webhooks.tls_opts,
    )
    log.info("TrainJobStatus feature gate on: serving the status server", port=settings.port)
    return (server,)


async def run(
    args: argparse.Namespace, cfg: Configuration, options: Options, argv: Sequence[str] = ()
) -> int:
    if args.webhook_child_fds:  # the webhook process of a manager (trainer/webhook_process.py)
        sockets, pressure_fd = parse_fds(args.webhook_child_fds)
        return await run_child(args, cfg, options, api_level(cfg.api_level), sockets, pressure_fd)
    try:
        components = select(args.controllers)
    except ValueError as err:
        log.error("invalid flags", error=str(err))
        return 1
    try:
        rest = await get_config(args.kubeconfig or None)
    except RestConfigError as err:
        log.error("unable to get kubeconfig", error=str(err))
        return 1
    apply_client_connection(rest, cfg)
    pressure = admission_pressure(args)
    try:
        return await run_manager(args, cfg, options, argv, rest, components, pressure)
    finally:
        if pressure is not None:
            pressure.close()


async def run_manager(
    args: argparse.Namespace,
    cfg: Configuration,
    options: Options,
    argv: Sequence[str],
    rest: RestConfig,
    components: list[Component],
    pressure: AdmissionPressure | None,
) -> int:
    """The manager's process: the components' controllers, their webhooks (served here or by the
    webhook process), certificates, probes and metrics, until a signal or a failure."""
    if pressure is not None:
        options = dataclasses.replace(
            options, controller=dataclasses.replace(options.controller, yield_to=pressure)
        )
    async with Cluster(rest, field_owner=FIELD_OWNER, event_source="trainer-controller-manager") as cluster:
        mgr = Manager(cluster, options)
        mgr.add_healthz_check("healthz", ping)
        level = api_level(cfg.api_level)  # main() validated a --api-level into cfg.api_level
        try:
            await check_trainjob_crd(mgr.api_reader, level)
        except CrdLevelMismatch as err:
            log.error("refusing to start: " + str(err))
            return 1
        except Forbidden as err:  # RBAC without config/rbac's CRD read: the level stays unchecked
            log.warning("cannot check the TrainJob CRD's API level", level=level.name, error=str(err))
        except RequestError as err:
            log.error("unable to read the TrainJob CRD", error=str(err))
            return 1
        webhooks = webhook_server(args, cfg, options, level, pressure=pressure) if components else None
        # before any component creates the Pod informer (docs/scale.md)
        await podcache.configure(mgr, cfg.pod_cache, [c.name for c in components])
        # One per process: the runtimes are built once. With a webhook process, the webhooks
        # are registered there, not here.
        context = SetupContext(
            mgr, None if args.webhook_process else webhooks, level=level.runtime, jobset_level=level.jobset
        )
        enabled = []
        configurations: list[WebhookConfiguration] = []
        for component in components:
            try:
                registered = await component.setup(context)
            except RequestError as err:  # the API server stayed unreachable past discovery's retries
                log.error("unable to set up the controllers", component=component.name, error=str(err))
                return 1
            if registered:
                enabled.append(component.name)
                configurations += component.configurations(context.level)
                log.info("controllers registered", component=component.name)
            else:
                log.info("component skipped", component=component.name)
        status_servers = status_server(mgr, webhooks, cfg, enabled, level)
        relayed: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        if webhooks is not None and args.webhook_process and configurations:
            process = WebhookProcess(
                child_command(argv, enabled), cert_dir=webhooks.cert_dir, pressure=pressure
            )
            relayed = relay_metrics(REGISTRY, RELAYED, process.fetch_metrics)
            serve_webhooks(mgr, process, cfg, tuple(configurations), status_servers)
        elif webhooks is not None and webhooks.paths:
            serve_webhooks(mgr, webhooks, cfg, tuple(configurations), status_servers)
        if not enabled:
            log.warning("no controllers are registered: running the empty manager (probes and metrics only)")
        log.info("starting manager", controllers=enabled, leader_election=mgr.options.leader_election)
        with relayed:
            return await run_until_signalled(mgr, pending=early_signals.received)


def admission_pressure(args: argparse.Namespace) -> AdmissionPressure | None:
    """What the reconciles yield to (``--yield-to-admission``): shared with the webhook process
    when there is one, else with this process's webhook thread; None when they never wait."""
    if args.yield_to_admission <= 0:
        return None
    if args.webhook_process:
        return AdmissionPressure.shared(max_wait=args.yield_to_admission)
    return AdmissionPressure(max_wait=args.yield_to_admission)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:  # a subcommand: compare with the Go originals
        from trainer.conformance.cli import main as conformance

        return conformance(argv[1:])
    if argv[:1] == ["migrate"]:  # a subcommand: stored objects rewritten for another level
        from trainer.migrate.cli import main as migrate

        return migrate(argv[1:])
    if argv[:1] == ["delete-runtimes"]:  # a subcommand: the Helm chart's pre-delete hook
        from trainer.install import delete_runtimes_main

        return delete_runtimes_main(argv[1:])
    if argv[:1] == ["upstream-e2e"]:  # a subcommand: upstream's own e2e suites against both
        from trainer.conformance.upstream_e2e import main as upstream_e2e

        return upstream_e2e(argv[1:])
    args = parse_args(argv)
    mlog.configure_from_flags(args)
    try:
        cfg = read_configuration(args.config)
        options = manager_options(cfg)
    except ConfigurationError as err:
        log.error("unable to load the configuration", error=str(err))
        return 1
    if args.api_level:
        if args.api_level not in LEVELS:
            log.error(
                "invalid flags",
                error=f'--api-level: Unsupported value: "{args.api_level}": supported values: '
                + ", ".join(f'"{name}"' for name in LEVELS),
            )
            return 1
        cfg.api_level = args.api_level
    try:
        features.reset()
        features.set_from_map(cfg.feature_gates or {})
        if args.feature_gates:
            features.set_from_map(features.parse_flag(args.feature_gates))
    except features.FeatureGateError as err:
        log.error("unable to set feature gates", error=str(err))
        return 1
    # a JobSet gate is valid only at a level whose JobSet release has it
    if gate_errors := feature_gate_errors(api_level(cfg.api_level), features.named()):
        log.error("unable to set feature gates", error=aggregate(gate_errors))
        return 1
    try:  # third-party runtime plugins (docs/plugins.md)
        external_plugins.configure(
            cfg.runtime_plugins or [],
            builtin_plugin_names(api_level(cfg.api_level).runtime),
            report=not args.webhook_child_fds,  # the manager says it; its webhook process loads them too
        )
    except external_plugins.PluginConfigError as err:
        log.error("unable to load the runtime plugins", error=str(err))
        return 1
    return loops.run(run(args, cfg, options, argv))


if __name__ == "__main__":
    sys.exit(main())
