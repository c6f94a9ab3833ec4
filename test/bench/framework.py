"""Framework scenario: one trivial reconciler on three frameworks, side by side.

Every ConfigMap of namespace ``bench`` is mirrored into a Secret of the same name by

- ``ours``: ``test/bench/mirror/mirror_ours.py`` on this repository's ``manager/``;
- ``kopf``: ``test/bench/mirror/mirror_kopf.py`` on kopf (``pip install -e '.[bench]'``);
- ``controller-runtime``: ``test/bench/mirror/mirror-go`` (controller-runtime v0.22.1, client-go
  v0.34.1, the versions jobset v0.10.1 builds with), built once from the Go module proxy into the
  envtest cache (``manager.envtest.assets.ensure_go_source``);

``python-io``: ``test/bench/mirror/mirror_io.py``, the same watches and writes on this
repository's REST transport without the framework (no cache, queue or reconcile): what the I/O
costs in Python, so ``ours / python-io`` is the framework's own share;

and, as the ``floor``, by no controller: this script's own bare aiohttp client writes each Secret
right after its ConfigMap, in ``--concurrency`` + 16 lanes (the creates in flight plus the
controllers' workers): the API server's own rate for the same writes.

For each, one after the other, a fresh etcd + kube-apiserver (``manager.envtest``); the controller
runs as its own process (16 concurrent reconciles, no client-side rate limit on any of them), is
proven live by one warm-up ConfigMap whose Secret must appear, then N ConfigMaps are created,
``--concurrency`` at a time, and a watch on Secrets times each from its ConfigMap's create to its
Secret appearing. Measured: throughput (N / time from the first create to the last Secret),
latency p50/p99/max, the controller's CPU seconds during the run (and per 1,000 reconciles) and
its peak RSS (``VmHWM``).

``--rounds R`` runs every side R times, the order of the sides rotated each round (so no side is
always first or last while the machine drifts), and reports each side's median of every figure
and, for the ratios, the median (and range) of the ratios taken within each round: two sides of
one round share the machine's conditions of that minute, which a ratio of medians would mix.

    python test/bench/framework.py --n 5000            # what ``make bench`` runs
    python test/bench/framework.py --n 5000 --rounds 3 # what ``make bench-mirror`` runs
    python test/bench/framework.py --n 500 --sides ours,floor
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from manager import longrun
from manager.envtest import Environment
from manager.envtest.assets import ensure_go_source
from manager.envtest.process import Process
from trainer.conformance.kube import Kube

HERE = Path(__file__).resolve().parent
NAMESPACE = "bench"
WORKERS = 16
SIDES = ("ours", "kopf", "controller-runtime", "python-io", "floor")
TICKS = os.sysconf("SC_CLK_TCK")


#: Where the run is, for the line that says why it stopped (manager/longrun.py).
PROGRESS = longrun.Progress("bench", unit="sides")


def say(message: str) -> None:
    PROGRESS.say(message)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"p50": at(0.50), "p99": at(0.99), "max": round(ordered[-1], 3)}


def argv_of(side: str) -> list[str]:
    if side == "ours":
        return [sys.executable, str(HERE / "mirror" / "mirror_ours.py")]
    if side == "kopf":
        return [sys.executable, str(HERE / "mirror" / "mirror_kopf.py")]
    if side == "python-io":
        return [sys.executable, str(HERE / "mirror" / "mirror_io.py")]
    binary, seconds = ensure_go_source(HERE / "mirror" / "mirror-go", "mirror-go")
    if seconds:
        say(f"built mirror-go in {seconds:.0f}s")
    return [str(binary)]


def configmap(name: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "mirror-bench"}},
        "data": {"index": str(i), "config.yaml": f"replicas: {i % 7}\nname: {name}\n"},
    }


def secret_of(cm: dict[str, Any]) -> dict[str, Any]:
    import base64

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": cm["metadata"]["name"], "namespace": NAMESPACE},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in cm["data"].items()},
    }


class SecretWatch:
    """First time each Secret of the namespace is seen in a watch."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.seen: dict[str, float] = {}
        self.ready = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        cfg = self.kube.config
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=cfg.ssl_context or False)) as s:
            while True:
                headers = {"Accept": "application/json"}
                if auth := await cfg.authorization():
                    headers["Authorization"] = auth
                url = f"{cfg.host.rstrip('/')}/api/v1/namespaces/{NAMESPACE}/secrets?watch=true"
                async with s.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                    self.ready.set()
                    async for line in resp.content:
                        now = time.monotonic()
                        event = json.loads(line)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self.seen.setdefault(event["object"]["metadata"]["name"], now)

    def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def wait_for(self, names: set[str], deadline: float) -> bool:
        while time.monotonic() < deadline:
            if names.issubset(self.seen.keys()):
                return True
            await asyncio.sleep(0.1)
        return names.issubset(self.seen.keys())


async def run_side(side: str, n: int, concurrency: int, timeout: float) -> dict[str, Any]:
    argv = None if side == "floor" else argv_of(side)  # build (once) before the clock matters
    async with Environment() as env:
        kube = await Kube.from_kubeconfig(env.kubeconfig)
        proc: Process | None = None
        watch = SecretWatch(kube)
        try:
            status, body = await kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, None
            )
            if status != 201:
                raise RuntimeError(f"namespace: {status} {body}")
            watch.start()
            await asyncio.wait_for(watch.ready.wait(), 30)
            if argv is not None:
                proc = Process(
                    name=side,
                    argv=[*argv, f"--namespace={NAMESPACE}", f"--workers={WORKERS}"],
                    log=env.dir / f"{side}.log",
                    extra_env={"KUBECONFIG": str(env.kubeconfig)},
                )
                proc.start(detached=False)
                warm = configmap("warm-up", -1)
                await kube.create(warm, NAMESPACE)
                if not await watch.wait_for({"warm-up"}, time.monotonic() + 120):
                    raise RuntimeError(f"{side}: the warm-up Secret never appeared; see {proc.log}")
                await asyncio.sleep(1)
            cpu0 = cpu_seconds(proc.pid) if proc else 0.0
            names = [f"cm-{i:05d}" for i in range(n)]
            created: dict[str, float] = {}
            failures: list[str] = []
            # The floor writes both objects itself, with the controllers' workers as extra lanes.
            sem = asyncio.Semaphore(concurrency + (WORKERS if proc is None else 0))

            async def one(i: int, name: str) -> None:
                async with sem:
                    cm = configmap(name, i)
                    started = time.monotonic()
                    status, body = await kube.create(cm, NAMESPACE)
                    created[name] = started
                    if status != 201:
                        failures.append(f"{name}: {status} {str(body)[:200]}")
                    elif proc is None:  # the floor: this client writes the Secret itself
                        status, body = await kube.create(secret_of(cm), NAMESPACE)
                        if status != 201:
                            failures.append(f"{name} secret: {status} {str(body)[:200]}")

            start = time.monotonic()
            await asyncio.gather(*(one(i, name) for i, name in enumerate(names)))
            creates_s = time.monotonic() - start
            complete = await watch.wait_for(set(names), start + timeout)
            seen = [watch.seen[k] for k in names if k in watch.seen]
            last = max(seen) if seen else time.monotonic()
            cpu = round(cpu_seconds(proc.pid) - cpu0, 2) if proc else None
            rss = round(peak_rss_mb(proc.pid), 1) if proc else None
            total = last - start
            latency = [watch.seen[k] - created[k] for k in names if k in watch.seen and k in created]
            result = {
                "side": side,
                "n": n,
                "concurrency": concurrency,
                "workers": WORKERS if proc else None,
                "complete": complete,
                "secrets_seen": len(seen),
                "create_failures": failures[:5],
                "create_failures_count": len(failures),
                "configmap_creates_s": round(creates_s, 2),
                "total_s": round(total, 2),
                "objects_per_s": round(len(seen) / total, 1) if total > 0 else None,
                "latency_s": percentiles(latency),
                "cpu_s": cpu,
                "cpu_s_per_1000": round(cpu * 1000 / n, 2) if cpu is not None else None,
                "peak_rss_mb": rss,
            }
            say(json.dumps(result))
            return result
        finally:
            await watch.stop()
            if proc is not None:
                proc.stop(timeout=10)
            await kube.close()


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


ROWS: list[tuple[str, str, str | None]] = [
    ("throughput, ConfigMaps mirrored (objects/s)", "objects_per_s", None),
    ("first create to last Secret (s)", "total_s", None),
    ("ConfigMap to Secret p50 (s)", "latency_s", "p50"),
    ("ConfigMap to Secret p99 (s)", "latency_s", "p99"),
    ("controller CPU (s)", "cpu_s", None),
    ("controller CPU per 1,000 reconciles (s)", "cpu_s_per_1000", None),
    ("controller peak RSS (MB)", "peak_rss_mb", None),
]
"""The table's rows: label, the result's key, the sub-key of a percentile dict."""

OTHERS = ("kopf", "controller-runtime", "python-io", "floor")


def _value(result: dict[str, Any], key: str, sub: str | None) -> Any:
    v = result.get(key)
    return v.get(sub) if sub and isinstance(v, dict) else v


def _median(values: list[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def combine(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """One result per side from several rounds: each figure the side's median over the rounds,
    the rounds' own results under ``rounds``; ``ours`` also carries, per other side and figure,
    the ratio ours / other of every round (``round_ratios``). One round comes back as it is."""
    if len(rounds) == 1:
        return rounds[0]
    combined: dict[str, dict[str, Any]] = {}
    for side in [s for s in SIDES if all(s in r for r in rounds)]:
        runs = [r[side] for r in rounds]
        result = dict(runs[-1])
        for _, key, sub in ROWS:
            median = _median([_value(run, key, sub) for run in runs])
            if sub:
                result[key] = {**result[key], sub: median}
            else:
                result[key] = median
        result["complete"] = all(run["complete"] for run in runs)
        result["create_failures_count"] = sum(run["create_failures_count"] for run in runs)
        result["create_failures"] = [f for run in runs for f in run["create_failures"]][:5]
        result["rounds"] = runs
        combined[side] = result
    if "ours" in combined:
        combined["ours"]["round_ratios"] = {
            other: {
                key + (f".{sub}" if sub else ""): [
                    round(a / b, 3) if a is not None and b else None
                    for a, b in ((_value(r["ours"], key, sub), _value(r[other], key, sub)) for r in rounds)
                ]
                for _, key, sub in ROWS
            }
            for other in OTHERS
            if other in combined
        }
    return combined


def _round_ratio(results: dict[str, dict[str, Any]], other: str, key: str, sub: str | None) -> str:
    """The median of the per-round ratios, with their range: ``0.18x (0.17-0.20x)``."""
    per_round = results["ours"].get("round_ratios", {}).get(other, {}).get(key + (f".{sub}" if sub else ""))
    if per_round is None:
        return _ratio(_value(results["ours"], key, sub), _value(results[other], key, sub))
    present = [v for v in per_round if v is not None]
    if not present:
        return "n/a"
    return f"{statistics.median(present):.2f}x ({min(present):.2f}-{max(present):.2f}x)"


def table(results: dict[str, dict[str, Any]]) -> str:
    order = [s for s in SIDES if s in results]
    head = ["", *order]
    ratios = [(f"ours / {o}", o) for o in OTHERS if o in results and "ours" in results]
    head += [label for label, _ in ratios]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, key, sub in ROWS:
        values = [_value(results[s], key, sub) for s in order]
        cells = [label, *("n/a" if v is None else f"{v:g}" for v in values)]
        cells += [_round_ratio(results, other, key, sub) for _, other in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    first = results[order[0]]
    rounds = len(first.get("rounds", ())) or 1
    how = (
        f"{rounds} rounds, the sides' order rotated each round; each figure a side's median, each "
        "ratio the median of the rounds' own ratios (their range in brackets)"
        if rounds > 1
        else "one round"
    )
    return (
        f"{first['n']} ConfigMaps mirrored into Secrets ({first['concurrency']} creates in flight, "
        f"{WORKERS} concurrent reconciles), each side on its own etcd + kube-apiserver; {how}.\n\n"
        + "\n".join(lines)
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=5000, help="ConfigMaps (default 5000)")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"any of {', '.join(SIDES)}")
    parser.add_argument("--concurrency", type=int, default=50, help="ConfigMap creates in flight")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the Secrets")
    parser.add_argument(
        "--rounds", type=int, default=1, help="run every side this many times, in rotated order (default 1)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="framework.json/.md go here")
    args = parser.parse_args(argv)
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    for side in sides:
        if side not in SIDES:
            parser.error(f"--sides: unknown side {side!r} ({', '.join(SIDES)})")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    return longrun.command(PROGRESS, lambda: run_sides(args, sides))


def rotated(sides: list[str], r: int) -> list[str]:
    """Round ``r``'s order: the sides rotated by ``r``."""
    k = r % len(sides)
    return sides[k:] + sides[:k]


def run_sides(args: argparse.Namespace, sides: list[str]) -> int:
    rounds: list[dict[str, dict[str, Any]]] = []
    for r in range(args.rounds):
        results: dict[str, dict[str, Any]] = {}
        for side in rotated(sides, r):
            label = side if args.rounds == 1 else f"{side} (round {r + 1} of {args.rounds})"
            say(f"{label}: {args.n} ConfigMaps")
            with PROGRESS.scenario(label):
                results[side] = longrun.run_async(run_side(side, args.n, args.concurrency, args.timeout))
        rounds.append(results)
    combined = combine(rounds)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "framework.json").write_text(json.dumps(combined, indent=2) + "\n")
    report = table(combined)
    (args.out / "framework.md").write_text(report)
    print(report)
    incomplete = [r["side"] for r in combined.values() if not r["complete"] or r["create_failures_count"]]
    if incomplete:
        say(f"incomplete on: {', '.join(incomplete)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
