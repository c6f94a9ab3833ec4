"""A stand-in webhook process for test_fw_webhook_process.py: a ``ParentLink`` around a server
that only says it listens, one relayed counter, and what the test asks of it by flag."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from prometheus_client import Counter

from manager.webhook.process import CHILD_FDS_FLAG, ParentLink


class ListeningServer:
    async def start(self, started: asyncio.Event) -> None:
        started.set()
        await asyncio.Event().wait()


async def main(args: argparse.Namespace) -> int:
    if args.exit_at_once is not None:
        return int(args.exit_at_once)
    requests = Counter("controller_runtime_webhook_requests", "requests", ["webhook", "code"], registry=None)
    requests.labels("/validate", "200").inc(args.answered)
    fds = tuple(int(fd) for fd in getattr(args, CHILD_FDS_FLAG.lstrip("-").replace("-", "_")).split(","))
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        loop.add_signal_handler(signal.SIGTERM, stopping.set)
    link = ParentLink(ListeningServer(), (fds[0], fds[1]), stopping.set, [requests])
    task = asyncio.create_task(link.start(asyncio.Event()))
    if args.exit_after_serving is not None:
        await asyncio.sleep(0.5)
        return int(args.exit_after_serving)
    await stopping.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument(CHILD_FDS_FLAG, default="")
    parser.add_argument("--answered", type=int, default=0)
    parser.add_argument("--exit-at-once", default=None)
    parser.add_argument("--exit-after-serving", default=None)
    parser.add_argument("--ignore-sigterm", action="store_true")
    sys.exit(asyncio.run(main(parser.parse_args())))
