"""CPU per watch event: ``RestTransport.stream`` (a connection of its own, manager/client/http1_stream.py)
against a bare aiohttp session, each watching the ConfigMaps a writer creates on a real kube-apiserver.

Run: ``.venv/bin/python test/bench/bench_watch.py [--n 5000] [--rounds 3]`` (a script, not a pytest
test: it starts its own etcd + kube-apiserver). Each round a writer in another process creates
``n`` ConfigMaps in a namespace of their own, 16 at a time, while this process watches that
namespace with one client; the two clients alternate round by round. The API server flushes each
event on its own, as in a controller's life, so this is the cost of a watch's small reads. CPU is
this process's own (``getrusage``) from the watch's start to its ``n``-th event: the writer and
the API server are not in it. The aiohttp side is what ``RestTransport.stream`` was before
(lines cut from ``iter_any`` chunks, each decoded), without its metrics and error mapping.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
from bench_post import LANES, cpu_seconds  # test/bench is this script's directory

from manager import _json, loops
from manager.client.rest import RestTransport
from manager.config import RestConfig, load_kubeconfig
from manager.envtest import Environment


def configmaps(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps"


def configmap(i: int) -> dict[str, object]:
    return {"metadata": {"name": f"cm-{i:05d}"}, "data": {"a": "x" * 200, "b": "y" * 300}}


async def write(kubeconfig: Path, namespace: str, n: int) -> None:
    """The writer process: ``n`` ConfigMaps into ``namespace``, ``LANES`` at a time."""
    config = await load_kubeconfig(kubeconfig)
    numbers = iter(range(n))
    async with RestTransport(config) as transport:

        async def lane() -> None:
            for i in numbers:
                await transport.request("POST", configmaps(namespace), body=configmap(i))

        await asyncio.gather(*(lane() for _ in range(LANES)))


async def ours(config: RestConfig, path: str) -> AsyncIterator[object]:
    async with RestTransport(config) as transport:
        async for event in transport.stream(path, params={"watch": True}, inactivity_timeout=60):
            yield event


async def bare(config: RestConfig, path: str) -> AsyncIterator[object]:
    headers = {"Accept": "application/json"}
    auth = await config.authorization()
    if auth:
        headers["Authorization"] = auth
    connector = aiohttp.TCPConnector(ssl=config.ssl_context or False)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=60)
    async with (
        aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as session,
        session.get(config.host + path, params={"watch": "true"}, headers=headers, timeout=timeout) as answer,
    ):
        buffer = bytearray()
        async for chunk in answer.content.iter_any():
            buffer += chunk
            start = 0
            while (newline := buffer.find(b"\n", start)) >= 0:
                line = bytes(buffer[start:newline])
                start = newline + 1
                if line.strip():
                    yield _json.loads(line)
            del buffer[:start]


Watch = Callable[[RestConfig, str], AsyncIterator[object]]


async def one_round(env: Environment, config: RestConfig, watch: Watch, namespace: str, n: int) -> float:
    """Watch ``namespace`` while the writer fills it: us of this process's CPU per event."""
    async with RestTransport(config) as transport:
        await transport.request("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    cpu = cpu_seconds()
    events = watch(config, configmaps(namespace))
    first = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.5)  # the watch is open before the first write
    writer = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--write",
        str(n),
        "--namespace",
        namespace,
        "--kubeconfig",
        str(env.kubeconfig),
    )
    deadline = time.monotonic() + 300
    await first
    seen = 1
    async for _ in events:
        seen += 1
        if seen == n:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{namespace}: {seen} of {n} events within 300 s")
    used = cpu_seconds() - cpu
    await events.aclose()
    if await writer.wait() != 0:
        raise RuntimeError(f"{namespace}: the writer failed")
    return used / n * 1e6


async def main(n: int, rounds: int) -> None:
    async with Environment() as env:
        config = await load_kubeconfig(env.kubeconfig)
        results: dict[str, list[float]] = {"RestTransport": [], "aiohttp session": []}
        for r in range(rounds):
            for name, watch in (("RestTransport", ours), ("aiohttp session", bare)):
                us = await one_round(env, config, watch, f"{name[:4].lower()}{r}", n)
                results[name].append(us)
                print(f"{name:16s} round {r}: {us:6.1f} us CPU per event", flush=True)
    print()
    for name, runs in results.items():
        print(f"{name:16s} median: {statistics.median(runs):6.1f} us CPU per event")
    ratio = statistics.median(results["RestTransport"]) / statistics.median(results["aiohttp session"])
    print(f"RestTransport / aiohttp session: {ratio:.2f}x CPU per watch event")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="events per round and client")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write is not None:
        loops.run(write(args.kubeconfig, args.namespace, args.write))
    else:
        loops.run(main(args.n, args.rounds))  # the manager's loop (uvloop), as the watches run there
