"""Bytes the ElasticQuota controller keeps per Running pod (tracemalloc; docs/scale.md).

python test/bench/eq_requests_cost.py [--pods N]

Each pod is decoded from its JSON as the informer does and handed to the Pod watch's request
observer; what stays allocated afterwards is what the controller keeps: the pod's name and its
parsed requests (shared by pods that request the same).
"""

import argparse
import tracemalloc

import orjson

from manager.controller.event import CreateEvent
from trainer.controllers.elasticquota import RunningPodRequests


def deployment_pod(i: int) -> bytes:
    memory = ("128Mi", "256Mi", "1G")[i % 3]
    return orjson.dumps(
        {
            "metadata": {"name": f"web-{i // 50}-7c9d8f-{i:06d}", "namespace": f"ns-{i % 20}"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": memory}}}]
            },
            "status": {"phase": "Running"},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=100_000)
    args = parser.parse_args()
    encoded = [deployment_pod(i) for i in range(args.pods)]
    tracemalloc.start()
    running = RunningPodRequests()
    observer = running.observer()
    for raw in encoded:
        observer.create(CreateEvent(orjson.loads(raw)))
    kept, _ = tracemalloc.get_traced_memory()
    print(f"{args.pods} Running pods: {kept / 1e6:.1f} MB kept, {kept / args.pods:.0f} bytes per pod")


if __name__ == "__main__":
    main()
