"""One admission answer's own work, in process: what the webhook process spends per TrainJob answer.

An AdmissionReview body as the API server sends it on a create (the TrainJob after the
defaulter: metadata with uid, creationTimestamp and one managedFields entry) goes through what
the webhook server does with it: ``decode_review``, the handler (the level's Go-typed decode,
then the TrainJob validator or defaulter on the shipped runtime read from a store as the
cache's), ``encode_review``. No HTTP, TLS or event loop contention: the answer's own CPU, which
``make bench-admission`` reports side by side as "the manager's own time per answer" together
with all of that.

    python test/bench/admission_answer.py                 # level v2.3, 2,000 answers each
    python test/bench/admission_answer.py --profile       # cProfile of the validator's answers
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from manager.meta.object import Json
from manager.scheme import GroupVersionKind
from manager.webhook import AdmissionRequest, AdmissionResponse, validating_handler
from manager.webhook.admission import decode_review, encode_review
from trainer import levels
from trainer.api import trainer_constants as tc
from trainer.runtime.registry import new_runtimes
from webhooks import trainjob, trainjob_defaulter, typed

RUNTIMES = Path(__file__).resolve().parents[2] / "config" / "runtimes" / "torch-distributed.yaml"
NOW = "2026-12-06T05:00:00Z"


class StoreReader:
    """Reads as the cache's store serves them: the stored object itself, no copy."""

    def __init__(self, objects: list[Json]) -> None:
        self.objects = {
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
        }

    async def get(self, gvk: GroupVersionKind, name: str, namespace: str = "") -> Json:
        return self.objects[(gvk.kind, namespace, name)]

    async def list(self, gvk: GroupVersionKind, **_: Any) -> list[Json]:
        return [o for (kind, _ns, _name), o in self.objects.items() if kind == gvk.kind]


def trainjob_object() -> Json:
    return {
        "apiVersion": f"{tc.GROUP}/{tc.VERSION}",
        "kind": tc.TrainJobKind,
        "metadata": {
            "name": "burst-0001",
            "namespace": "default",
            "uid": "0b1c2d3e-1111-2222-3333-444455556666",
            "generation": 1,
            "creationTimestamp": NOW,
            "managedFields": [
                {
                    "manager": "python-aiohttp",
                    "operation": "Update",
                    "apiVersion": f"{tc.GROUP}/{tc.VERSION}",
                    "time": NOW,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:spec": {".": {}, "f:runtimeRef": {".": {}, "f:name": {}}, "f:suspend": {}}
                    },
                }
            ],
        },
        "spec": {
            "runtimeRef": {
                "name": "torch-distributed",
                "kind": tc.ClusterTrainingRuntimeKind,
                "apiGroup": tc.GROUP,
            },
            "suspend": True,
        },
    }


def review_body(obj: Json) -> bytes:
    kind = {"group": tc.GROUP, "version": tc.VERSION, "kind": tc.TrainJobKind}
    resource = {"group": tc.GROUP, "version": tc.VERSION, "resource": "trainjobs"}
    request = {
        "uid": "5a1e0c9b-0000-4000-8000-000000000001",
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": obj["metadata"]["name"],
        "namespace": obj["metadata"]["namespace"],
        "operation": "CREATE",
        "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
        "object": obj,
        "oldObject": None,
        "dryRun": False,
        "options": {
            "kind": "CreateOptions",
            "apiVersion": "meta.k8s.io/v1",
            "fieldManager": "python-aiohttp",
        },
    }
    return orjson.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request})


Handler = Callable[[AdmissionRequest], Awaitable[AdmissionResponse]]


async def handlers(level_name: str) -> dict[str, Handler]:
    level = levels.get(level_name)
    docs = [d for d in yaml.safe_load_all(RUNTIMES.read_text()) if d]
    runtimes = await new_runtimes(StoreReader(docs), None, level=level.runtime)
    decode = typed.decoder(
        f"{tc.GROUP}/{tc.VERSION}", tc.TrainJobKind, types_file=level.runtime.trainer_go_types
    )
    out: dict[str, Handler] = {
        "validator": validating_handler(trainjob.TrainJobValidator(runtimes), decode=decode)
    }
    if level.runtime.trainjob_defaulter is not None:
        out["defaulter"] = trainjob_defaulter.handler()
    return out


async def answer(handler: Handler, body: bytes) -> bytes:
    api_version, req = decode_review(body)
    return encode_review(api_version, req.uid, await handler(req))


async def measure(handler: Handler, body: bytes, n: int) -> float:
    """Seconds per answer, after 50 to warm up."""
    for _ in range(50):
        await answer(handler, body)
    start = time.perf_counter()
    for _ in range(n):
        await answer(handler, body)
    return (time.perf_counter() - start) / n


async def main(args: argparse.Namespace) -> int:
    body = review_body(trainjob_object())
    for name, handler in (await handlers(args.level)).items():
        response = orjson.loads(await answer(handler, body))["response"]
        if not response["allowed"]:
            raise SystemExit(f"{name} refused the benchmark's TrainJob: {response}")
        if args.profile and name == "validator":
            profile = cProfile.Profile()
            profile.enable()
            await measure(handler, body, args.n)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        print(f"{name}: {await measure(handler, body, args.n) * 1e6:.0f} us per answer ({args.n} answers)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="answers per handler (default 2000)")
    parser.add_argument("--level", default="v2.3", choices=sorted(levels.LEVELS))
    parser.add_argument("--profile", action="store_true", help="cProfile the validator's answers")
    raise SystemExit(asyncio.run(main(parser.parse_args())))
