"""Informer throughput and memory per cached object against a real kube-apiserver.

Run: ``.venv/bin/python test/bench/bench_cache.py [--pods 10000]`` (a script, not a pytest test:
it starts its own etcd + kube-apiserver and takes a minute or two). The informer runs on the
manager's event loop (``loops.new_event_loop``).

Measures:
* initial LIST + sync of N Pods through a SharedInformer (objects/s delivered to a handler);
* watch events/s while N/5 Pods are relabelled concurrently (until the last event is seen);
* memory per cached Pod: RSS delta / N after a gc, and the retained Python heap / N
  (tracemalloc, a second informer), against the Pods' JSON size with and without
  managedFields (the cache strips managedFields by default); ``--compact`` measures the store
  that keeps objects as JSON bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc
from typing import Any

from manager import _json, longrun, loops
from manager.cache.informer import SharedInformer
from manager.client import Client, Patch
from manager.cluster import Cluster
from manager.config import load_kubeconfig
from manager.envtest import Environment
from manager.scheme import GroupVersionKind

POD = GroupVersionKind("", "v1", "Pod")
NS = "bench"


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{i:05d}",
            "namespace": NS,
            "labels": {
                "app": "bench",
                "shard": str(i % 16),
                "jobset.sigs.k8s.io/jobset-name": f"js-{i // 100}",
            },
            "annotations": {"bench/index": str(i)},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/trainer:latest",
                    "command": ["python", "-m", "train"],
                    "env": [{"name": "RANK", "value": str(i)}, {"name": "WORLD_SIZE", "value": "8"}],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
            "restartPolicy": "Never",
        },
    }


async def bounded(n: int, concurrency: int, make: Any) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await make(i)

    await asyncio.gather(*(one(i) for i in range(n)))


class Counter:
    def __init__(self) -> None:
        self.adds = 0
        self.updates = 0
        self.last = 0.0
        self.target = -1
        self.done = asyncio.Event()

    def on_add(self, obj: dict[str, Any], initial: bool) -> None:
        self.adds += 1
        self.last = time.perf_counter()

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.updates += 1
        self.last = time.perf_counter()
        if self.updates == self.target:
            self.done.set()

    def on_delete(self, obj: dict[str, Any]) -> None:
        pass


async def run(pods: int, compact: bool) -> dict[str, float]:
    async with Environment() as env:
        config = await load_kubeconfig(env.kubeconfig)
        async with Cluster(config) as cluster:
            c: Client = cluster.api_reader
            await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            t0 = time.perf_counter()
            await bounded(pods, 64, lambda i: c.create(pod(i)))
            create_s = time.perf_counter() - t0
            sample, _ = await c.list_raw(POD, namespace=NS, limit=500)
            json_full = sum(len(_json.dumps(p)) for p in sample) / len(sample)
            for p in sample:
                p["metadata"].pop("managedFields", None)
            json_stripped = sum(len(_json.dumps(p)) for p in sample) / len(sample)
            del sample

            gc.collect()
            rss0 = rss_bytes()
            mapping = await cluster.mapper.mapping(POD)
            informer = SharedInformer(c, mapping, namespaces=[NS], compact_store=compact)
            counter = Counter()
            informer.add_event_handler(counter)
            t1 = time.perf_counter()
            task = asyncio.create_task(informer.run())
            await informer.wait_for_sync()
            sync_s = time.perf_counter() - t1
            gc.collect()
            rss1 = rss_bytes()

            # Time spent applying watch events to the store and handlers (not network/decode),
            # to see the informer's own ceiling apart from how fast the apiserver takes writes.
            upsert = informer.upsert
            busy = [0.0]

            def timed_upsert(obj: dict[str, Any], scope: int = 0) -> None:
                start = time.perf_counter()
                upsert(obj, scope)  # the reflector's sink passes its scope
                busy[0] += time.perf_counter() - start

            informer.upsert = timed_upsert  # type: ignore[method-assign]

            updates = pods // 5
            t2 = time.perf_counter()
            await bounded(
                updates,
                64,
                lambda i: c.patch(pod(i), Patch.merge({"metadata": {"labels": {"touched": "1"}}})),
            )
            writes_s = time.perf_counter() - t2
            counter.target = updates
            if counter.updates >= updates:  # all seen before the writes even returned
                counter.done.set()
            await counter.done.wait()
            watch_s = counter.last - t2
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            del informer, task
            gc.collect()

            # Retained heap, measured apart: RSS also counts transient LIST pages whose memory
            # the allocator keeps, and tracemalloc would slow the throughput figures above.
            tracemalloc.start()
            heap0 = tracemalloc.get_traced_memory()[0]
            second = SharedInformer(c, mapping, namespaces=[NS], compact_store=compact)
            task = asyncio.create_task(second.run())
            await second.wait_for_sync()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            gc.collect()
            heap = tracemalloc.get_traced_memory()[0] - heap0
            tracemalloc.stop()
            return {
                "pods": pods,
                "create_seconds": create_s,
                "initial_sync_seconds": sync_s,
                "initial_objects_per_second": pods / sync_s,
                "watch_updates": updates,
                "patch_seconds": writes_s,
                "watch_events_per_second": updates / watch_s,
                "informer_apply_capacity_per_second": updates / busy[0],
                "rss_delta_mib": (rss1 - rss0) / 2**20,
                "rss_bytes_per_cached_pod": (rss1 - rss0) / pods,
                "retained_heap_bytes_per_cached_pod": heap / pods,
                "json_bytes_per_pod": json_full,
                "json_bytes_per_pod_without_managed_fields": json_stripped,
            }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--compact", action="store_true", help="keep cached objects as JSON bytes")
    args = parser.parse_args()
    progress = longrun.Progress("bench_cache", unit=None)

    def body() -> int:
        with progress.step(f"{args.pods} Pods through one informer"):
            results = longrun.run_async(run(args.pods, args.compact), loop_factory=loops.new_event_loop)
        for key, value in results.items():
            print(f"{key:45s} {value:12.1f}" if isinstance(value, float) else f"{key:45s} {value:12d}")
        return 0

    return longrun.command(progress, body)


if __name__ == "__main__":
    sys.exit(main())
