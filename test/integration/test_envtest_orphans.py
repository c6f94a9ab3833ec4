"""A control plane started in-process dies with its process, even when that process is killed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

from manager.envtest.process import pid_alive
from manager.testing import eventually

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from manager.envtest import Environment

    async def main():
        env = Environment(sys.argv[1])
        await env.start()
        print(json.dumps([p.pid for p in env.processes]), flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_killed_owner_leaves_no_orphans(tmp_path: Path) -> None:
    owner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(tmp_path / "env"), cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    assert owner.stdout is not None
    pids = json.loads(await asyncio.wait_for(owner.stdout.readline(), 120))
    assert len(pids) == 2 and all(pid_alive(p) for p in pids)

    os.kill(owner.pid, signal.SIGKILL)  # no atexit, no finally: only the kernel can clean up
    await owner.wait()

    async def all_gone() -> None:
        assert not [p for p in pids if pid_alive(p)]

    await eventually(all_gone, timeout=30, message="etcd/kube-apiserver outlived a killed owner")
