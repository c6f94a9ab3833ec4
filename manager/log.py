"""Logging: one pipeline for structlog and stdlib ``logging``, rendered as controller-runtime's zap.

Every line, whether a module logs through ``structlog.get_logger`` or ``logging.getLogger``,
goes through one stdlib handler whose ``ProcessorFormatter`` runs the same processors: one
format, one level, one stream. JSON lines carry zap's production keys (``level``, ``ts``,
``logger``, ``caller``, ``msg``, then the key/values, then ``stacktrace``); the console format is
zap's development console encoder (tab-separated time, LEVEL, logger, caller, message and a JSON
object of the key/values).

Controllers bind ``controller``, ``kind``, ``namespace``, ``name`` and ``reconcileID`` through
contextvars for the duration of one reconcile, so every line a reconciler logs carries them
without passing a logger around. Never log secrets: ``redact`` masks the usual suspects in
event dicts (tokens, passwords, certificate keys) before rendering.

A Python traceback is rendered only for a record carrying an exception at or above the
stacktrace level (zap's ``--zap-stacktrace-level``); below it the line keeps the error text.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import logging
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TextIO

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

SENSITIVE_KEYS = frozenset({"token", "password", "secret", "authorization", "bearer", "tls.key", "key_data"})
REDACTED = "[REDACTED]"

Encoder = Literal["json", "console"]
TIME_ENCODINGS = ("epoch", "millis", "nanos", "iso8601", "rfc3339", "rfc3339nano")
TimeEncoding = Literal["epoch", "millis", "nanos", "iso8601", "rfc3339", "rfc3339nano"]

# zap's level names (lowercase in JSON, upper case on the console); Python's CRITICAL is zap's panic.
_ZAP_LEVEL = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warn",
    logging.ERROR: "error",
    logging.CRITICAL: "panic",
}
_METHOD_LEVEL = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}
# --zap-log-level names; an integer n > 0 is a verbosity (V(n)) and means debug here.
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "error": logging.ERROR, "panic": logging.CRITICAL}
# --zap-stacktrace-level names (zap accepts exactly these three).
STACKTRACE_LEVELS = {"info": logging.INFO, "error": logging.ERROR, "panic": logging.CRITICAL}

_ROOT = Path(__file__).resolve().parent.parent
_handler: logging.Handler | None = None


def parse_log_level(value: str) -> int:
    """``--zap-log-level``: debug, info, error, panic, or a verbosity > 0 (upstream's texts on error)."""
    level = LOG_LEVELS.get(value.lower())
    if level is not None:
        return level
    try:
        verbosity = int(value)
    except ValueError:
        raise ValueError(f'invalid log level "{value}"') from None
    if verbosity <= 0:
        raise ValueError(f'invalid log level "{value}"')
    return logging.DEBUG


def parse_stacktrace_level(value: str) -> int:
    level = STACKTRACE_LEVELS.get(value.lower())
    if level is None:
        raise ValueError(f'invalid stacktrace level "{value}"')
    return level


def parse_encoder(value: str) -> Encoder:
    lowered = value.lower()
    if lowered == "json":
        return "json"
    if lowered == "console":
        return "console"
    raise ValueError(f'invalid encoder value "{value}"')


def parse_time_encoding(value: str) -> TimeEncoding:
    lowered = value.lower()
    for name in TIME_ENCODINGS:
        if lowered == name:
            return name  # type: ignore[return-value]
    raise ValueError(f'invalid time-encoding value "{value}"')


def _go_zone(moment: _dt.datetime, colon: bool) -> str:
    offset = moment.utcoffset() or _dt.timedelta()
    if not offset:
        return "Z"
    seconds = int(offset.total_seconds())
    sign = "+" if seconds >= 0 else "-"
    hours, minutes = divmod(abs(seconds) // 60, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" if colon else f"{sign}{hours:02d}{minutes:02d}"


def encode_time(ns: int, encoding: TimeEncoding, tz: _dt.tzinfo = _dt.UTC) -> float | int | str:
    """A timestamp in nanoseconds since the epoch, as zap's time encoder of that name writes it."""
    if encoding == "epoch":
        return ns / 1e9
    if encoding == "millis":
        return ns / 1e6
    if encoding == "nanos":
        return ns
    seconds, nanos = divmod(ns, 1_000_000_000)
    base, zone, compact_zone = _second(seconds, tz)
    if encoding == "iso8601":  # Go layout 2006-01-02T15:04:05.000Z0700
        return f"{base}.{nanos // 1_000_000:03d}{compact_zone}"
    if encoding == "rfc3339":  # 2006-01-02T15:04:05Z07:00
        return f"{base}{zone}"
    # RFC3339Nano, 2006-01-02T15:04:05.999999999Z07:00: trailing zeros (and a bare dot) dropped
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{base}{'.' + fraction if fraction else ''}{zone}"


@functools.lru_cache(maxsize=8)
def _second(seconds: int, tz: _dt.tzinfo) -> tuple[str, str, str]:
    """The date and time of one second, and its zone (with and without the colon); lines share them."""
    moment = _dt.datetime.fromtimestamp(seconds, tz)
    return moment.strftime("%Y-%m-%dT%H:%M:%S"), _go_zone(moment, colon=True), _go_zone(moment, colon=False)


def redact(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Mask values whose key names a credential."""
    for key in list(event_dict):
        if key.lower() in SENSITIVE_KEYS:
            event_dict[key] = REDACTED
    return event_dict


@dataclass(frozen=True)
class _Settings:
    encoder: Encoder
    time_encoding: TimeEncoding
    stacktrace_level: int


def _caller(record: logging.LogRecord | None) -> str | None:
    """zap's short caller (``package/file.go:line``): the path relative to the project, else the file."""
    if record is None or not record.pathname:
        return None
    return f"{_short_path(record.pathname)}:{record.lineno}"


@functools.lru_cache(maxsize=1024)
def _short_path(pathname: str) -> str:
    path = Path(pathname)
    try:
        return path.relative_to(_ROOT).as_posix()
    except ValueError:
        return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def _stamp(settings: _Settings) -> Processor:
    def stamp(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        record = event_dict.get("_record")
        if "ts" not in event_dict:
            ns = int(record.created * 1e9) if record is not None else time.time_ns()
            event_dict["ts"] = encode_time(ns, settings.time_encoding)
        return event_dict

    return stamp


def _zap_fields(settings: _Settings) -> Processor:
    """Reorder into zap's keys and decide about the traceback; returns the dict the renderer writes."""

    def fields(_logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
        record: logging.LogRecord | None = event_dict.pop("_record", None)
        event_dict.pop("_from_structlog", None)
        level = record.levelno if record is not None else _METHOD_LEVEL.get(method, logging.INFO)
        out: dict[str, Any] = {"level": _ZAP_LEVEL.get(level, logging.getLevelName(level).lower())}
        out["ts"] = event_dict.pop("ts", None)
        name = event_dict.pop("logger", None) or (record.name if record is not None else None)
        if name and name != "root":
            out["logger"] = name
        caller = _caller(record)
        if caller:
            out["caller"] = caller
        out["msg"] = event_dict.pop("event", "")
        event_dict.pop("level", None)
        exc_info = event_dict.pop("exc_info", None)
        stack_info = event_dict.pop("stack_info", None)
        event_dict.pop("positional_args", None)
        out.update(event_dict)
        exc = _exception(exc_info)
        if exc is not None:
            if level >= settings.stacktrace_level:
                out["stacktrace"] = "".join(traceback.format_exception(*exc)).rstrip()
            elif "error" not in out:
                out["error"] = "".join(traceback.format_exception_only(exc[0], exc[1])).strip()
        elif stack_info and level >= settings.stacktrace_level:
            out["stacktrace"] = str(stack_info)
        return out

    return fields


def _exception(exc_info: Any) -> tuple[Any, Any, Any] | None:
    if not exc_info:
        return None
    if isinstance(exc_info, BaseException):
        return (type(exc_info), exc_info, exc_info.__traceback__)
    if isinstance(exc_info, tuple):
        return exc_info if exc_info[0] is not None else None
    info = sys.exc_info()
    return info if info[0] is not None else None


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def _render_json(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    return orjson.dumps(event_dict, default=_json_default, option=orjson.OPT_NON_STR_KEYS).decode()


def _render_console(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> str:
    """zap's console encoder: time, LEVEL, logger, caller, message, then the fields as JSON."""
    event_dict = dict(event_dict)
    stack = event_dict.pop("stacktrace", None)
    parts = [str(event_dict.pop("ts", "")), str(event_dict.pop("level", "")).upper()]
    for key in ("logger", "caller"):
        value = event_dict.pop(key, None)
        if value:
            parts.append(str(value))
    parts.append(str(event_dict.pop("msg", "")))
    if event_dict:
        parts.append(_render_json(None, "", event_dict))
    line = "\t".join(parts)
    return f"{line}\n{stack}" if stack else line


class _ZapFormatter(logging.Formatter):
    """structlog's ``ProcessorFormatter`` contract, without copying each record.

    A record from structlog (``wrap_for_formatter``) carries its event dict in ``msg``; a stdlib
    record is turned into one (message, exception, stack) and run through ``foreign_pre_chain``.
    Then ``processors`` run; the last one returns the line.
    """

    def __init__(self, foreign_pre_chain: list[Processor], processors: list[Processor]) -> None:
        super().__init__()
        self.foreign_pre_chain = foreign_pre_chain
        self.processors = processors

    def format(self, record: logging.LogRecord) -> str:
        method: str
        ed: Any
        if hasattr(record, "_logger") and isinstance(record.msg, dict):
            method = str(getattr(record, "_name", record.levelname.lower()))
            ed = {**record.msg, "_record": record, "_from_structlog": True}
        else:
            method = record.levelname.lower()
            ed = {"event": record.getMessage(), "_record": record, "_from_structlog": False}
            if record.exc_info:
                ed["exc_info"] = record.exc_info
            if record.stack_info:
                ed["stack_info"] = record.stack_info
            for proc in self.foreign_pre_chain:
                ed = proc(None, method, ed)
        for proc in self.processors:
            ed = proc(None, method, ed)
        return str(ed)


class _CurrentStderr:
    """``sys.stderr`` as it is when a line is written, not when logging was set up (a test
    runner swaps it per test)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure(
    *,
    level: int | str = logging.INFO,
    fmt: Encoder | None = None,
    stream: TextIO | None = None,
    stacktrace_level: int | str | None = None,
    time_encoding: TimeEncoding = "rfc3339",
    development: bool = False,
) -> None:
    """Set up the one log pipeline for the process (structlog and stdlib ``logging``).

    Defaults are controller-runtime's zap defaults: production is JSON, info, stacktraces at
    error; ``development`` is console, debug, stacktraces at warn. ``fmt`` None picks JSON in
    production (console on a TTY) and console in development.
    """
    global _handler
    out: TextIO | _CurrentStderr = stream if stream is not None else _CurrentStderr()
    if isinstance(level, str):
        level = LOG_LEVELS.get(level.lower()) or logging.getLevelNamesMapping()[level.upper()]
    if isinstance(stacktrace_level, str):
        stacktrace_level = (
            STACKTRACE_LEVELS.get(stacktrace_level.lower())
            or logging.getLevelNamesMapping()[stacktrace_level.upper()]
        )
    if stacktrace_level is None:
        stacktrace_level = logging.WARNING if development else logging.ERROR
    if fmt is None:
        is_tty = getattr(out, "isatty", lambda: False)()
        fmt = "console" if development or is_tty else "json"
    settings = _Settings(encoder=fmt, time_encoding=time_encoding, stacktrace_level=stacktrace_level)

    shared: list[Processor] = [
        merge_bound,
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        _stamp(settings),
    ]
    formatter = _ZapFormatter(
        # a stdlib record's ``extra={...}`` become key/values, as structlog's keyword arguments
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            redact,
            _zap_fields(settings),
            _render_json if fmt == "json" else _render_console,
        ],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    root.addHandler(handler)
    root.setLevel(level)
    _handler = handler
    # kubernetes_asyncio logs whole response bodies (Secrets included) at debug: never below info
    logging.getLogger("kubernetes_asyncio").setLevel(max(level, logging.INFO))
    logging.captureWarnings(True)

    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )


def ensure_configured() -> bool:
    """Set up the default pipeline unless the process already configured structlog; True if it did.

    Without it structlog's own defaults apply: every level down to debug, rendered for a
    terminal, and without ``redact``. controller-runtime drops every line until
    ``log.SetLogger`` is called; here a program that never calls :func:`configure` gets its
    production defaults instead (JSON, info, stacktraces at error), told so in one line.
    ``Manager.run`` calls this, so a controller written on the framework logs as the
    entry point's does.
    """
    if structlog.is_configured():
        return False
    configure()
    structlog.get_logger("manager.log").info(
        "logging was not configured: using the defaults (JSON, info); call manager.log.configure to choose"
    )
    return True


def _flag_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type reporting upstream's text (``invalid log level "x"``) on bad input."""

    def convert(value: str) -> Any:
        try:
            return parse(value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    return convert


def bind_flags(parser: argparse.ArgumentParser, *, time_encoding: TimeEncoding = "rfc3339") -> None:
    """controller-runtime's zap flags (``zap.Options.BindFlags``) with their value sets.

    ``--log-format`` is kept as an alias of ``--zap-encoder``. ``time_encoding`` is the default
    of ``--zap-time-encoding`` (a program's ``zap.Options{TimeEncoder: ...}``).
    """
    parser.add_argument(
        "--zap-devel",
        action="store_true",
        help="development mode defaults: console encoder, debug level, stacktraces from warn",
    )
    parser.add_argument("--zap-encoder", type=_flag_type(parse_encoder), default=None, metavar="json|console")
    parser.add_argument(
        "--log-format",
        dest="zap_encoder",
        type=_flag_type(parse_encoder),
        metavar="json|console",
        help="alias of --zap-encoder",
    )
    parser.add_argument(
        "--zap-log-level",
        type=_flag_type(parse_log_level),
        default=None,
        metavar="LEVEL",
        help="debug, info, error, panic, or an integer verbosity > 0 (debug)",
    )
    parser.add_argument(
        "--zap-stacktrace-level",
        type=_flag_type(parse_stacktrace_level),
        default=None,
        metavar="info|error|panic",
        help="level at and above which a logged exception carries its traceback",
    )
    parser.add_argument(
        "--zap-time-encoding",
        type=_flag_type(parse_time_encoding),
        default=time_encoding,
        metavar="|".join(TIME_ENCODINGS),
    )


def configure_from_flags(args: argparse.Namespace, stream: TextIO | None = None) -> None:
    """``zap.New(zap.UseFlagOptions(...))``: the flags of ``bind_flags`` over zap's mode defaults."""
    devel = bool(args.zap_devel)
    level = (
        args.zap_log_level if args.zap_log_level is not None else (logging.DEBUG if devel else logging.INFO)
    )
    configure(
        level=level,
        fmt=args.zap_encoder or ("console" if devel else "json"),
        stream=stream,
        stacktrace_level=args.zap_stacktrace_level,
        time_encoding=args.zap_time_encoding,
        development=devel,
    )


#: What ``bound`` holds in this context: one ContextVar for all its keys, so binding a
#: reconcile's seven values is one ``set`` and one ``reset`` (structlog's
#: ``bound_contextvars`` sets and resets a ContextVar per key: 18 us of every reconcile).
_BOUND: ContextVar[Mapping[str, object]] = ContextVar("manager.log.bound", default=MappingProxyType({}))


def merge_bound(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: the values ``bound`` holds in this context, after the line's own keys
    (a line's own value wins). :func:`configure` installs it; a program that configures
    structlog itself adds it beside ``structlog.contextvars.merge_contextvars``."""
    for key, value in _BOUND.get().items():
        event_dict.setdefault(key, value)
    return event_dict


class bound:
    """Bind values to every log line emitted in this context (task-local via contextvars), until
    the ``with`` block ends; nested blocks add to the outer one's values.

        with log.bound(controller="trainjob", name="job"): ...
        with log.bound({"controller": "trainjob", "name": "job"}): ...  # a prepared mapping
    """

    __slots__ = ("_token", "_values")

    def __init__(self, values: Mapping[str, object] | None = None, /, **more: object) -> None:
        self._values: Mapping[str, object] = {**values, **more} if values and more else (values or more)
        self._token: Token[Mapping[str, object]] | None = None

    def __enter__(self) -> None:
        outer = _BOUND.get()
        self._token = _BOUND.set({**outer, **self._values} if outer else self._values)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _BOUND.reset(self._token)
            self._token = None


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger


def current_context() -> dict[str, object]:
    """The values bound in this context right now (what a reconcile's log lines carry): those of
    :class:`bound` and of structlog's ``bound_contextvars``."""
    return {**_BOUND.get(), **structlog.contextvars.get_contextvars()}
