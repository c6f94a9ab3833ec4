"""CPU per API request: ``RestTransport`` (its HTTP/1.1 pool, manager/client/http1.py) against a bare
aiohttp session, each creating Secrets 16 at a time on a real kube-apiserver.

Run: ``.venv/bin/python test/bench/bench_post.py [--n 2000] [--rounds 3]`` (a script, not a pytest
test: it starts its own etcd + kube-apiserver). The two clients alternate round by round in one
process; CPU is the process's own (``getrusage``), so the API server's work is not in it. The
aiohttp side is what ``RestTransport`` sent every request through before the pool, without
``RestTransport``'s own work (headers, deadline, metrics), so it flatters aiohttp.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp

from manager import _json
from manager.client.rest import RestTransport
from manager.config import load_kubeconfig
from manager.envtest import Environment

LANES = 16
SECRETS = "/api/v1/namespaces/bench/secrets"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def in_lanes(n: int, create: Callable[[int], Awaitable[None]]) -> tuple[float, float]:
    """Create ``n`` objects over ``LANES`` concurrent lanes: (us of CPU per request, requests/s)."""
    numbers = iter(range(n))

    async def lane() -> None:
        for i in numbers:
            await create(i)

    started, cpu = time.monotonic(), cpu_seconds()
    await asyncio.gather(*(lane() for _ in range(LANES)))
    return (cpu_seconds() - cpu) / n * 1e6, n / (time.monotonic() - started)


def secret(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "data": {"key": "dmFsdWU="}}


async def main(n: int, rounds: int) -> None:
    async with Environment() as env:
        config = await load_kubeconfig(env.kubeconfig)
        async with RestTransport(config) as transport:
            await transport.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "bench"}})
            headers = await transport._headers("application/json")
            connector = aiohttp.TCPConnector(ssl=config.ssl_context or False, limit=100)
            async with aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar()
            ) as session:

                async def ours(tag: str, i: int) -> None:
                    await transport.request("POST", SECRETS, body=secret(f"{tag}-{i}"))

                async def bare(tag: str, i: int) -> None:
                    data = _json.dumps(secret(f"{tag}-{i}"))
                    async with session.post(config.host + SECRETS, data=data, headers=headers) as answer:
                        if answer.status != 201:
                            raise RuntimeError(f"POST answered {answer.status}")
                        _json.loads(await answer.read())

                results: dict[str, list[tuple[float, float]]] = {"RestTransport": [], "aiohttp session": []}
                for r in range(rounds):
                    for name, create in (("RestTransport", ours), ("aiohttp session", bare)):
                        tag = f"{name[:4].lower()}{r}"
                        us, rate = await in_lanes(n, lambda i, c=create, t=tag: c(t, i))  # type: ignore[misc]
                        results[name].append((us, rate))
                        print(
                            f"{name:16s} round {r}: {us:6.0f} us CPU per POST, {rate:6.0f} POST/s", flush=True
                        )
    print()
    for name, runs in results.items():
        print(
            f"{name:16s} median: {statistics.median(u for u, _ in runs):6.0f} us CPU per POST, "
            f"{statistics.median(r for _, r in runs):6.0f} POST/s"
        )
    ours_us = statistics.median(u for u, _ in results["RestTransport"])
    bare_us = statistics.median(u for u, _ in results["aiohttp session"])
    print(f"RestTransport / aiohttp session: {ours_us / bare_us:.2f}x CPU per POST")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="POSTs per round and client")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.rounds))
