"""An opt-in debug endpoint: ``/debug/tasks`` dumps every asyncio task with its stack.

controller-runtime offers pprof for Go; the Python counterpart that answers "where is it stuck?"
is the list of live tasks and what each awaits. CPU profiles are better taken from outside (e.g.
py-spy). Disabled by default (``Options.debug_bind_address``); never expose it publicly.
"""

from __future__ import annotations

import asyncio
import io

from aiohttp import web

from manager._http import HTTPServer


def task_dump() -> str:
    """One block per task: its name, state and current stack (innermost frame last)."""
    out = io.StringIO()
    tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    out.write(f"{len(tasks)} tasks\n")
    for task in tasks:
        state = "done" if task.done() else "pending"
        out.write(f"\n--- {task.get_name()} ({state}) {task.get_coro()!r}\n")
        task.print_stack(file=out)
    return out.getvalue()


def debug_app() -> web.Application:
    async def tasks(_request: web.Request) -> web.Response:
        return web.Response(text=task_dump())

    app = web.Application()
    app.router.add_get("/debug/tasks", tasks)
    return app


def debug_server(bind_address: str) -> HTTPServer:
    return HTTPServer(debug_app(), bind_address, name="debug")
