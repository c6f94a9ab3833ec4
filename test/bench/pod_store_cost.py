"""Bytes per cached Pod in the store (tracemalloc), whole and projected (docs/scale.md).

python test/bench/pod_store_cost.py          # tracemalloc, bytes per Pod in the store
python test/bench/pod_store_cost.py --rss    # RSS per Pod after a 100k-Pod list
"""

import copy
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "trainer"))
from test_podcache import rich_pod

from manager.cache.informer import SharedInformer
from manager.cache.store import field_index_func, field_index_name
from manager.client import Client
from manager.client.restmapper import RESTMapping
from manager.scheme import GroupVersionKind
from trainer.controllers import podcache
from trainer.controllers.podgroup import index_pod_group
from trainer.jobset.placement import pod_job_key_index, pod_name_index

M = RESTMapping(GroupVersionKind("", "v1", "Pod"), "pods", True)


def informer(transform, compact):
    """A Pod informer with the three Pod indexes the controllers register."""
    inf = SharedInformer(Client(None, None), M, transform=transform, compact_store=compact)
    for name, f in (
        ("b", index_pod_group),
        ("c", pod_job_key_index),
        ("d", pod_name_index),
    ):
        inf.add_index(field_index_name(name), field_index_func(f))
    return inf


def run(transform, compact, n=20000, relevant=False):
    inf = informer(transform, compact)
    base = rich_pod()
    if relevant:
        base["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "js"
    pods = []
    for i in range(n):
        p = copy.deepcopy(base)
        p["metadata"]["name"] = f"web-{i}-abcde"
        p["metadata"]["uid"] = f"uid-{i:08d}-aaaa-bbbb-cccc"
        p["metadata"]["resourceVersion"] = str(1000 + i)
        pods.append(p)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    inf.replace([inf._prepare(p) for p in pods], None, True, prepared=True)
    del pods
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used / n


if "--rss" not in sys.argv:
    print(f"full compact   {run(podcache.full_pod, True):.0f} B/pod")
    print(f"slim compact   {run(podcache.minimal_transform, True):.0f} B/pod")
    print(f"relevant compact {run(podcache.minimal_transform, True, relevant=True):.0f} B/pod")


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def list_rss(n: int = 100000) -> None:
    """RSS per unrelated Pod after a list of ``n`` through the informer as the reflector runs it
    (pages of 500 decoded, each Pod prepared as its page arrives), the ElasticQuota handler's
    requests queued and drained, then a heap trim (``python test/bench/pod_store_cost.py --rss``)."""
    import gc

    import orjson

    from manager.controller.reconcile import Request
    from manager.memory import trim_heap
    from manager.workqueue.queue import Queue

    inf = informer(podcache.minimal_transform, True)
    base = rich_pod()
    pages = []
    for start in range(0, n, 500):
        page = []
        for i in range(start, min(n, start + 500)):
            p = copy.deepcopy(base)
            p["metadata"]["name"] = f"web-{i}-abcde"
            p["metadata"]["uid"] = f"uid-{i:08d}-aaaa-bbbb-cccc"
            p["metadata"]["resourceVersion"] = str(1000 + i)
            page.append(p)
        pages.append(orjson.dumps({"items": page}))
    gc.collect()
    before = rss_kb()
    items = [inf.prepare_listed(item) for body in pages for item in orjson.loads(body)["items"]]
    inf.replace(items, None, True, prepared=True)
    del items
    queue: Queue[Request] = Queue("elasticquota")

    class Enqueue:
        def on_add(self, obj: dict, initial: bool) -> None:
            queue.add(Request.for_object(obj))

    inf.add_event_handler(Enqueue())  # as a controller's source does once it starts
    while len(queue):
        queue.done(queue.get_nowait())
    gc.collect()
    listed = rss_kb()
    trim_heap()
    print(
        f"RSS after a {n}-Pod list: {(listed - before) * 1.024 / n:.2f} KB/pod, "
        f"after a heap trim {(rss_kb() - before) * 1.024 / n:.2f} KB/pod"
    )


if "--rss" in sys.argv:
    list_rss()
