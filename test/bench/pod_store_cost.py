"""Bytes per cached Pod in the store (tracemalloc), whole and projected (docs/scale.md).

python test/bench/pod_store_cost.py
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
from trainer.controllers.elasticquota import index_pod_phase
from trainer.controllers.podgroup import index_pod_group
from trainer.jobset.placement import pod_job_key_index, pod_name_index

M = RESTMapping(GroupVersionKind("", "v1", "Pod"), "pods", True)


def run(transform, compact, n=20000, relevant=False):
    inf = SharedInformer(Client(None, None), M, transform=transform, compact_store=compact)
    for name, f in (
        ("a", index_pod_phase),
        ("b", index_pod_group),
        ("c", pod_job_key_index),
        ("d", pod_name_index),
    ):
        inf.add_index(field_index_name(name), field_index_func(f))
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


print(f"full compact   {run(podcache.full_pod, True):.0f} B/pod")
print(f"slim compact   {run(podcache.minimal_transform, True):.0f} B/pod")
print(f"relevant compact {run(podcache.minimal_transform, True, relevant=True):.0f} B/pod")
