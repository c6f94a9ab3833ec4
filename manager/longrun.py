"""Long commands that always say why they stop.

A long command (``python -m trainer conformance`` and ``upstream-e2e``, the benchmark scripts of
``test/bench``, ``python -m manager.envtest up``) runs for minutes to hours, often unattended with
its output in a pipe or a file. :func:`command` runs its body so that whatever ends it, its last
line on stderr says why and where:

- an exception: ``<command>: error after N scenarios, during <scenario>/<step>: <Type>: <text>``
  and exit code ``error_code`` (2). Above that line: the further lines of a multi-line message
  (a process's log tail), and the traceback when the error is not of an ``expected`` kind (a bug
  in the command: the traceback helps) or when ``debug`` is on (``--debug``, or the environment
  variable ``LONGRUN_DEBUG=1``). Several errors at once (an ``ExceptionGroup``) are all named;
- SIGINT, SIGTERM or SIGHUP (unless ignored when the command started, as ``nohup`` does): the
  running coroutine is cancelled so that every ``finally`` runs (control planes stopped, work
  directories removed), then
  ``<command>: interrupted by SIGTERM after N scenarios, during <scenario>/<step>``; exit code
  128 + the signal's number (130 for SIGINT, 143 for SIGTERM). A second signal exits at once
  (``os._exit``, saying so): the children of a control plane die with their parent
  (``PR_SET_PDEATHSIG``) even then;
- ``SystemExit`` with a message or a non-zero code, a ``KeyboardInterrupt`` or a
  ``CancelledError`` nobody asked for: named the same way;
- a background task failing with nobody awaiting it: one line when asyncio reports it.

Where: :class:`Progress` knows the scenario being run (``with progress.scenario(name)``), the
steps active in it (``with progress.step(name)``, one per concurrent task) and how many scenarios
finished. An exception leaving a step remembers the step it left, so the error line names the
step that failed even though the cleanup ran other steps afterwards. ``diagnostics`` add facts
to the error line (e.g. "kube-apiserver (ours) was killed by SIGKILL: out of memory?"), taken
when the error leaves its step, before any cleanup stopped the processes they look at.

stdout is switched to line buffering: results printed before a crash are not lost in a pipe's
buffer. A SIGKILL of the command itself (the OOM killer) cannot be caught; ``Progress.say`` lines
(stderr, flushed) show the last scenario that started, and ``make`` prints ``Killed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import itertools
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import aiohttp

from manager.errors import Error

T = TypeVar("T")

DEBUG_ENV = "LONGRUN_DEBUG"
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Errors that are expected of a long command (a cluster gone, a timeout, a refused request):
#: one line, no traceback unless debug is on.
EXPECTED: tuple[type[BaseException], ...] = (OSError, Error, RuntimeError, aiohttp.ClientError)
_WHERE = "_longrun_where"
_FACTS = "_longrun_facts"


class Interrupted(BaseException):
    """Raised in synchronous code (no coroutine running) when a stop signal arrives."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class Progress:
    """Where a long command is: its scenario, the steps active in it, the scenarios finished."""

    def __init__(self, command: str, unit: str | None = "scenarios") -> None:
        self.command = command
        self.unit = unit
        self.done = 0
        self.current: str | None = None
        self.last_said = ""
        self.diagnostics: list[Callable[[], list[str]]] = []
        self._steps: dict[int, str] = {}
        self._ids = itertools.count()

    def say(self, message: str) -> None:
        """``<command>: message`` on stderr, flushed at once. Outside any step, the last message
        said tells where the command is (a command that prints its phases gets them as steps)."""
        self.last_said = message.splitlines()[0] if message else ""
        print(f"{self.command}: {message}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def scenario(self, name: str) -> Iterator[None]:
        """Run one scenario: counted as done when the block ends without an exception."""
        self.current = name
        try:
            yield
        except BaseException as err:
            self._remember(err)
            raise
        self.done += 1
        self.current = None

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """One step of the current scenario (or of the command, outside any scenario)."""
        key = next(self._ids)
        self._steps[key] = name
        try:
            yield
        except BaseException as err:
            self._remember(err, name)
            raise
        finally:
            del self._steps[key]

    def where(self) -> str:
        """``scenario/step, step`` of this moment (``start-up`` before anything ran)."""
        steps = ", ".join(self._steps.values())
        if not steps and self.last_said:
            said = self.last_said if len(self.last_said) <= 100 else self.last_said[:97] + "..."
            steps = f'after "{said}"'
        if self.current and steps:
            return f"{self.current}/{steps}"
        if self.current or steps:
            return self.current or steps
        return "start-up" if self.done == 0 else f"after the last of the {self.unit or 'steps'}"

    def count(self) -> str:
        """`` after N scenarios,`` (empty for a command that counts none)."""
        return f" after {self.done} {self.unit}," if self.unit else ""

    def _remember(self, err: BaseException, step: str | None = None) -> None:
        """Keep on ``err`` where it was raised: the step it leaves (the innermost, the first to
        see it), not the steps other tasks run at the same time."""
        if isinstance(err, asyncio.CancelledError | Interrupted | KeyboardInterrupt | GeneratorExit):
            return
        if getattr(err, _WHERE, None) is None:
            where = self.where() if step is None else f"{self.current}/{step}" if self.current else step
            with contextlib.suppress(AttributeError, TypeError):
                setattr(err, _WHERE, where)
                setattr(err, _FACTS, self.facts())  # now: the cleanup has not stopped anything yet

    def facts(self) -> list[str]:
        """What the diagnostics report (a failing diagnostic is skipped)."""
        out: list[str] = []
        for diagnostic in self.diagnostics:
            with contextlib.suppress(Exception):
                out += diagnostic()
        return out


def error_text(err: BaseException) -> str:
    """The error's text; one without text (a bare timeout) names its type and where it was raised."""
    if text := str(err):
        return text
    frames = traceback.extract_tb(err.__traceback__)
    # the innermost frame, and the innermost of this repository's own (a library's timer says little)
    picked = frames[-1:] + [f for f in frames if "site-packages" not in f.filename][-1:]
    places = dict.fromkeys(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in picked)
    return type(err).__name__ + (f" at {', called from '.join(places)}" if places else "")


def describe(err: BaseException) -> str:
    """``Type: first line of the text`` (the type is in the text already for one without text)."""
    text = error_text(err)
    first = text.splitlines()[0] if text else ""
    return first if not str(err) else f"{type(err).__name__}: {first}"


def exit_status(code: int | None) -> str:
    """How a child process ended, from ``Popen.returncode`` (negative: killed by a signal)."""
    if code is None:
        return "is running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}" + (": out of memory? (see dmesg)" if -code == signal.SIGKILL else "")
    return f"exited with code {code}"


def _leaves(err: BaseException) -> list[BaseException]:
    if isinstance(err, BaseExceptionGroup):
        return [leaf for sub in err.exceptions for leaf in _leaves(sub)]
    return [err]


class _Command:
    """The state of the one command running in this process."""

    def __init__(self, progress: Progress, debug: bool, expected: tuple[type[BaseException], ...]) -> None:
        self.progress = progress
        self.debug = debug or os.environ.get(DEBUG_ENV, "").lower() in ("1", "true", "yes")
        self.expected = expected
        self.signum: int | None = None
        self.where_at_signal = ""
        self.done_at_signal = ""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None

    def _write(self, line: str) -> None:
        # From a signal handler: os.write, never print (a print it interrupts would be reentered).
        with contextlib.suppress(OSError):
            os.write(2, f"{self.progress.command}: {line}\n".encode())

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.signum is not None:
            self._write(f"second signal ({name}) during the cleanup: exiting at once, without cleanup")
            os._exit(128 + signum)
        self.signum = signum
        self.where_at_signal = self.progress.where()
        self.done_at_signal = self.progress.count()
        self._write(f"{name} received: stopping and cleaning up (a second signal exits at once)")
        if self.loop is not None and self.task is not None and not self.task.done():
            self.task.cancel()
            self.loop.call_soon_threadsafe(lambda: None)  # wake the selector
            return
        raise Interrupted(signum)

    def interrupted_line(self) -> str:
        assert self.signum is not None
        return (
            f"interrupted by {signal.Signals(self.signum).name}{self.done_at_signal} "
            f"during {self.where_at_signal}"
        )

    def on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        err = context.get("exception")
        if isinstance(err, BaseException) and not isinstance(err, asyncio.CancelledError):
            self.progress.say(f"a background task failed: {describe(err)} ({context.get('message', '')})")
            if self.debug:
                traceback.print_exception(err, file=sys.stderr)
            return
        loop.default_exception_handler(context)

    def _expected(self, err: BaseException) -> bool:
        bug = isinstance(err, NotImplementedError | RecursionError)  # RuntimeErrors, but bugs
        return isinstance(err, self.expected) and not bug

    def error(self, err: BaseException, error_code: int) -> int:
        """Print the error (traceback where it helps, then its one line); the exit code."""
        leaves = _leaves(err)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        for leaf in leaves:
            if self.debug or not self._expected(leaf):
                traceback.print_exception(leaf, file=sys.stderr)
            for extra in error_text(leaf).splitlines()[1:]:
                print(f"  {extra}", file=sys.stderr)
        where = getattr(leaves[0], _WHERE, None) or self.progress.where()
        text = "; ".join(describe(leaf) for leaf in leaves)
        if len(leaves) > 1:
            text = f"{len(leaves)} errors: {text}"
        facts = getattr(leaves[0], _FACTS, None)
        if facts is None:
            facts = self.progress.facts()
        if facts:
            text += f" (meanwhile: {'; '.join(facts)})"
        self.progress.say(f"error{self.progress.count()} during {where}: {text}")
        return error_code


_current: _Command | None = None


def command(
    progress: Progress,
    body: Callable[[], int],
    *,
    debug: bool = False,
    expected: tuple[type[BaseException], ...] = EXPECTED,
    error_code: int = 2,
    on_stop: Callable[[], None] | None = None,
) -> int:
    """Run ``body`` (synchronous; its coroutines through :func:`run_async`) and return its exit
    code, or report why it stopped (see the module docstring). ``on_stop`` runs before the last
    line of an error or an interruption (e.g. to print the results so far)."""
    global _current
    state = _Command(progress, debug, expected)
    previous_command, _current = _current, state
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            # An ignored signal stays ignored (nohup's SIGHUP, SIGINT of a shell's background job)
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, state.on_signal)
    if not faulthandler.is_enabled():
        faulthandler.enable()  # a crash of the interpreter itself still prints its stacks
    with contextlib.suppress(AttributeError, ValueError, OSError):
        getattr(sys.stdout, "reconfigure")(line_buffering=True)  # noqa: B009 (not on every TextIO)
    code: int
    try:
        try:
            code = body()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            _current = previous_command
    except (Interrupted, KeyboardInterrupt, asyncio.CancelledError) as err:
        if state.signum is None and isinstance(err, asyncio.CancelledError):
            _run_on_stop(on_stop, progress)
            return state.error(err, error_code)
        if state.signum is None:  # a KeyboardInterrupt raised by hand, or before the handlers
            state.signum = err.signum if isinstance(err, Interrupted) else signal.SIGINT
            state.where_at_signal, state.done_at_signal = progress.where(), progress.count()
        _run_on_stop(on_stop, progress)
        progress.say(state.interrupted_line())
        return 128 + state.signum
    except SystemExit as err:
        if err.code is None or err.code == 0:
            return 0
        _run_on_stop(on_stop, progress)
        if isinstance(err.code, int):
            where = getattr(err, _WHERE, None) or progress.where()
            progress.say(f"exited with code {err.code}{progress.count()} during {where}")
            return err.code
        message = str(err.code)
        prefix = f"{progress.command}:"
        print(message if message.startswith(prefix) else f"{prefix} {message}", file=sys.stderr, flush=True)
        return 1
    except BaseException as err:
        _run_on_stop(on_stop, progress)
        return state.error(err, error_code)
    if state.signum is not None:  # the body swallowed the cancellation: still an interruption
        _run_on_stop(on_stop, progress)
        progress.say(state.interrupted_line())
        return 128 + state.signum
    return code


def _run_on_stop(on_stop: Callable[[], None] | None, progress: Progress) -> None:
    if on_stop is None:
        return
    try:
        on_stop()
    except Exception as err:
        progress.say(f"could not report the results so far: {describe(err)}")


def run_async(
    main: Coroutine[Any, Any, T],
    *,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> T:
    """``asyncio.run(main)``, wired to the running :func:`command`: a stop signal cancels ``main``
    (its ``finally`` blocks run), background task failures are printed. ``loop_factory``: the
    loop to run on (asyncio's by default; ``loops.new_event_loop`` for the manager's)."""
    state = _current

    async def wrapped() -> T:
        loop = asyncio.get_running_loop()
        if state is not None:
            state.loop, state.task = loop, asyncio.current_task()
            loop.set_exception_handler(state.on_loop_error)
            if state.signum is not None:  # the signal came while no loop ran: do not start
                raise Interrupted(state.signum)
        return await main

    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(wrapped())
    finally:
        if state is not None:
            state.loop = state.task = None


def run(
    progress: Progress,
    main: Callable[[], Coroutine[Any, Any, int]],
    **options: Any,
) -> int:
    """:func:`command` of one coroutine: ``run(progress, lambda: main(args))``."""
    return command(progress, lambda: run_async(main()), **options)
