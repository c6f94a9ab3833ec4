"""``python -m manager.envtest``: start or stop a local control plane from the shell.

up --dir DIR [--full] [--nodes N] [--real-node] [--crds PATH ...]
                                                        start detached, write DIR/kubeconfig
                                                        (stopped by SIGINT/SIGTERM: what it
                                                        started is stopped again, exit 130/143)
down --dir DIR                                          stop it and remove what up wrote
build [--pieces etcd kube node kwok]                    build the binaries into the cache
build-go MODULE@VERSION PACKAGE NAME                    build a Go main package, cache it
status --dir DIR                                        print the recorded state
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from manager import longrun
from manager.envtest import assets
from manager.envtest.environment import STATE_FILE, Environment, stop_detached
from manager.envtest.errors import EnvtestError
from manager.envtest.process import pid_alive


def _up(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    if (directory / STATE_FILE).exists():
        state = json.loads((directory / STATE_FILE).read_text())
        if any(pid_alive(p["pid"]) for p in state["processes"]):
            print(f"a control plane already runs in {directory} (run `down` first)", file=sys.stderr)
            return 1
        stop_detached(directory)
    started = time.monotonic()
    env = Environment(
        directory,
        full=args.full or args.real_node,
        nodes=args.nodes,
        real_node=args.real_node,
        crd_paths=args.crds,
        detached=True,
        pod_run_seconds=args.pod_run_seconds,
        pod_start_seconds=args.pod_start_seconds,
        pod_probe_delays=args.pod_probe_delays or None,
    )
    mode = "full" if args.full or args.real_node else "plain"
    if args.real_node:
        mode += " (with a real node)"
    progress = longrun.Progress("envtest up", unit=None)

    async def start() -> int:
        with progress.step(f"starting a {mode} control plane in {directory}"):
            try:
                await env.start()
            except BaseException:
                # Detached processes do not die with this one: whatever started is stopped here
                # (a failed start, a Ctrl-C), not left running without a state file.
                with progress.step("stopping what was started"):
                    await env.stop()
                raise
        return 0

    code = longrun.run(progress, start, debug=args.debug, error_code=1)
    if code:
        return code
    print(f"{mode} control plane ready in {time.monotonic() - started:.1f}s at {env.url}", file=sys.stderr)
    print(f"export KUBECONFIG={env.kubeconfig}")
    return 0


def _down(args: argparse.Namespace) -> int:
    info = stop_detached(args.dir)
    if info is None:
        print(f"nothing is running in {args.dir}", file=sys.stderr)
        return 0
    print(f"stopped {len(info.processes)} processes and removed what up wrote in {args.dir}", file=sys.stderr)
    return 0


def _build(args: argparse.Namespace) -> int:
    seconds = assets.build(args.pieces)
    print(f"built {' '.join(args.pieces)} into {assets.assets_dir()} in {seconds:.0f}s", file=sys.stderr)
    return 0


def _build_go(args: argparse.Namespace) -> int:
    module, sep, version = args.module.partition("@")
    if not sep or not version:
        print(f"error: {args.module!r} is not MODULE@VERSION", file=sys.stderr)
        return 2
    path, seconds = assets.ensure_go_main(assets.GoMain(module, version, args.package, args.name))
    how = f"built in {seconds:.0f}s" if seconds else "cached"
    print(f"{path} ({how})", file=sys.stderr)
    print(path)
    return 0


def _status(args: argparse.Namespace) -> int:
    state = Path(args.dir) / STATE_FILE
    if not state.exists():
        print(f"nothing is running in {args.dir}")
        return 1
    info = json.loads(state.read_text())
    for proc in info["processes"]:
        proc["alive"] = pid_alive(proc["pid"])
    print(json.dumps(info, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m manager.envtest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a control plane detached")
    up.add_argument("--dir", required=True)
    up.add_argument("--full", action="store_true", help="add controller-manager, scheduler and KWOK")
    up.add_argument("--nodes", type=int, default=2, help="fake KWOK nodes in full mode")
    up.add_argument(
        "--real-node",
        action="store_true",
        help="implies --full: also one real kubelet node (containerd, runc, CNI bridge, kube-proxy), "
        "tainted envtest/real-node=true:NoSchedule; root only (docs/realnode.md)",
    )
    up.add_argument("--crds", nargs="*", default=[], help="CRD files or directories to install")
    up.add_argument(
        "--pod-run-seconds",
        type=float,
        default=None,
        help="full mode: a Job's pod stays Running this long before KWOK makes it succeed "
        "(default: KWOK's own stages, about at once; env ENVTEST_POD_RUN_SECONDS)",
    )
    up.add_argument(
        "--pod-start-seconds",
        type=float,
        default=None,
        help="full mode: a scheduled pod stays Pending this long before it runs (env ENVTEST_POD_START_SECONDS)",
    )
    up.add_argument(
        "--pod-probe-delays",
        action="store_true",
        help="full mode: a pod with readiness/startup probes is Ready after their initialDelaySeconds "
        "(env ENVTEST_POD_PROBE_DELAYS)",
    )
    up.add_argument("--debug", action="store_true", help="print the traceback of a failed start")
    up.set_defaults(run=_up)
    down = sub.add_parser("down", help="stop the control plane started in DIR")
    down.add_argument("--dir", required=True)
    down.set_defaults(run=_down)
    build = sub.add_parser("build", help="build the control-plane binaries into the cache")
    build.add_argument(
        "--pieces",
        nargs="+",
        default=["etcd", "kube", "kwok"],
        choices=["etcd", "kube", "node", "kwok"],
    )
    build.set_defaults(run=_build)
    build_go = sub.add_parser("build-go", help="build a Go main package at MODULE@VERSION, cache it")
    build_go.add_argument("module", help="e.g. sigs.k8s.io/jobset@v0.10.1")
    build_go.add_argument("package", help="import path of the main package inside the module")
    build_go.add_argument("name", help="name of the binary in the cache")
    build_go.set_defaults(run=_build_go)
    status = sub.add_parser("status", help="show the recorded state of DIR")
    status.add_argument("--dir", required=True)
    status.set_defaults(run=_status)
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except EnvtestError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
