"""``make run``: the manager on a local control plane, or on ``$KUBECONFIG`` when it is set.

With no ``KUBECONFIG`` a full local cluster is started in ``--dir`` (or an already running one
from ``make cluster-up`` is reused), the project's CRDs and shipped runtimes are installed, and
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

from manager.envtest import Environment
from manager.envtest.environment import STATE_FILE
from manager.envtest.process import pid_alive

ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = ROOT / "config" / "crd"
RUNTIMES_DIR = ROOT / "config" / "runtimes"


def _running_cluster(directory: Path) -> Path | None:
    state = directory / STATE_FILE
    if not state.exists():
        return None
    info = json.loads(state.read_text())
    if info["processes"] and all(pid_alive(p["pid"]) for p in info["processes"]):
        return Path(info["kubeconfig"])
    return None


def _manifest_paths(directory: Path) -> list[Path]:
    return [directory] if directory.is_dir() and any(directory.rglob("*.yaml")) else []


async def _prepare(env: Environment) -> None:
    if crds := _manifest_paths(CRD_DIR):
        names = await env.install_crds(crds)
        print(f"installed {len(names)} CRDs", file=sys.stderr)


def _run_manager(kubeconfig: Path, extra: list[str]) -> int:
    argv = [sys.executable, "-m", "trainer", f"--kubeconfig={kubeconfig}", "--log-format=console", *extra]
    manager = subprocess.Popen(argv, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    try:
        return manager.wait()
    except KeyboardInterrupt:
        # The terminal sent SIGINT to the whole foreground group: let the manager shut down.
        manager.send_signal(signal.SIGINT)
        return manager.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make run", description=__doc__)
    parser.add_argument("--dir", default=".local/cluster", help="where a local cluster lives")
    parser.add_argument("--nodes", type=int, default=2, help="fake KWOK nodes")
    args, extra = parser.parse_known_args(argv)

    if kubeconfig := os.environ.get("KUBECONFIG"):
        print(f"running against KUBECONFIG={kubeconfig}", file=sys.stderr)
        return _run_manager(Path(kubeconfig), extra)

    directory = Path(args.dir).resolve()
    if (existing := _running_cluster(directory)) is not None:
        print(f"reusing the local cluster in {directory}", file=sys.stderr)
        asyncio.run(_prepare(Environment.attach(directory)))
        return _run_manager(existing, extra)

    env = Environment(directory, full=True, nodes=args.nodes)
    print(f"starting a full local cluster in {directory} ...", file=sys.stderr)
    asyncio.run(env.start())
    try:
        asyncio.run(_prepare(env))
        print(f"cluster ready: export KUBECONFIG={env.kubeconfig}", file=sys.stderr)
        return _run_manager(env.kubeconfig, extra)
    finally:
        asyncio.run(env.stop())
        print("local cluster stopped", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
