"""Logging: one pipeline (structlog and stdlib), zap's keys and flags, secrets never rendered."""

from __future__ import annotations

import argparse
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from manager import log
from trainer.__main__ import parse_args


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    logging.getLogger().setLevel(logging.WARNING)


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def test_json_lines_carry_zap_keys_bound_context_and_redact_secrets() -> None:
    out = io.StringIO()
    log.configure(fmt="json", stream=out, level="DEBUG")
    with log.bound(controller="trainjob", namespace="ns", name="job", reconcileID="r1"):
        log.get_logger("test").info("reconciling", token="s3cr3t", replicas=2)
    log.get_logger("test").debug("outside")
    first, second = lines(out)
    assert list(first)[:5] == ["level", "ts", "logger", "caller", "msg"], "zap's key order"
    assert first["msg"] == "reconciling" and first["logger"] == "test" and first["level"] == "info"
    assert first["caller"].startswith("test/unit/framework/test_log.py:")
    assert {k: first[k] for k in ("controller", "namespace", "name", "reconcileID", "replicas")} == {
        "controller": "trainjob",
        "namespace": "ns",
        "name": "job",
        "reconcileID": "r1",
        "replicas": 2,
    }
    assert first["token"] == "[REDACTED]" and "s3cr3t" not in out.getvalue()
    assert second["level"] == "debug"
    assert "controller" not in second, "context does not outlive the block"


def test_stdlib_records_go_through_the_same_pipeline() -> None:
    out = io.StringIO()
    log.configure(fmt="json", stream=out, level="info")
    with log.bound(reconcileID="r2"):
        logging.getLogger("manager.cache.reflector").info("watch of %s restarted", "pods")
    logging.getLogger("manager.cache.reflector").debug("below the level")
    logging.getLogger("manager.cache.reflector").info(
        "Caches populated", extra={"type": "v1/Pod", "items": 3}
    )
    logging.getLogger("manager.events").warning("event dropped", extra={"unused": 1})
    first, populated, second = lines(out)
    assert (populated["type"], populated["items"]) == ("v1/Pod", 3), "extra= become key/values"
    assert first["logger"] == "manager.cache.reflector" and first["msg"] == "watch of pods restarted"
    assert first["reconcileID"] == "r2" and first["level"] == "info" and "caller" in first
    assert second["level"] == "warn", "zap's name for warning"
    assert "below the level" not in out.getvalue()


def test_one_level_silences_both_kinds_of_logger() -> None:
    out = io.StringIO()
    log.configure(fmt="json", stream=out, level=log.parse_log_level("error"))
    logging.getLogger("manager.webhook.server").info("stdlib info")
    logging.getLogger("manager.webhook.server").warning("stdlib warning")
    log.get_logger("manager.controller").info("structlog info")
    log.get_logger("manager.controller").error("structlog error")
    logging.getLogger("trainer.controllers.jobset").error("stdlib error")
    assert [e["msg"] for e in lines(out)] == ["structlog error", "stdlib error"]


def test_console_is_zaps_development_encoder() -> None:
    out = io.StringIO()
    log.configure(fmt="console", stream=out, level="INFO", time_encoding="rfc3339")
    log.get_logger("test").debug("hidden")
    log.get_logger("test").info("shown", kind="TrainJob")
    text = out.getvalue()
    assert "hidden" not in text
    ts, level, logger, caller, msg, fields = text.strip().split("\t")
    assert (level, logger, msg) == ("INFO", "test", "shown")
    assert ts.endswith("Z") and caller.startswith("test/unit/framework/test_log.py:")
    assert json.loads(fields) == {"kind": "TrainJob"}


def _log_exception(logger: Any, stdlib: bool) -> None:
    try:
        raise ValueError("boom")
    except ValueError as err:
        if stdlib:
            logger.exception("handler failed")
        else:
            logger.error("Reconciler error", error=str(err), exc_info=err)


@pytest.mark.parametrize("stdlib", [False, True])
def test_a_traceback_only_at_or_above_the_stacktrace_level(stdlib: bool) -> None:
    def logger() -> Any:
        return logging.getLogger("x") if stdlib else log.get_logger("x")

    out = io.StringIO()
    log.configure(fmt="json", stream=out, stacktrace_level="error")
    _log_exception(logger(), stdlib)
    (entry,) = lines(out)
    assert entry["level"] == "error"
    assert entry["stacktrace"].startswith("Traceback") and "ValueError: boom" in entry["stacktrace"]

    out = io.StringIO()
    log.configure(fmt="json", stream=out, stacktrace_level="panic")
    _log_exception(logger(), stdlib)
    (entry,) = lines(out)
    assert "stacktrace" not in entry and "Traceback" not in out.getvalue()
    assert "boom" in entry["error"], "below the stacktrace level the error text stays"


def test_development_defaults_are_zaps() -> None:
    """--zap-devel: console, debug, stacktraces from warn (controller-runtime's addDefaults)."""
    out = io.StringIO()
    log.configure_from_flags(parse_args(["--zap-devel"]), stream=out)
    logger = log.get_logger("dev")
    logger.debug("visible in development")
    try:
        raise KeyError("k")
    except KeyError as err:
        logger.warning("warned", exc_info=err)
    text = out.getvalue()
    assert "\tDEBUG\tdev\t" in text and "visible in development" in text
    assert "\tWARN\tdev\t" in text and "Traceback" in text


def test_production_defaults_are_zaps() -> None:
    """No flags: JSON, info, stacktraces from error, RFC3339Nano timestamps (upstream's main)."""
    out = io.StringIO()
    log.configure_from_flags(parse_args([]), stream=out)
    logger = log.get_logger("prod")
    logger.debug("hidden")
    try:
        raise KeyError("k")
    except KeyError as err:
        logger.warning("warned", exc_info=err)
        logger.error("failed", exc_info=err)
    warned, failed = lines(out)
    assert "stacktrace" not in warned and "Traceback" in failed["stacktrace"]
    assert failed["ts"].endswith("Z") and "T" in failed["ts"]


@pytest.mark.parametrize(
    ("flag", "level"),
    [
        ("debug", logging.DEBUG),
        ("info", logging.INFO),
        ("error", logging.ERROR),
        ("panic", logging.CRITICAL),
        ("INFO", logging.INFO),
        ("1", logging.DEBUG),
        ("2", logging.DEBUG),
        ("10", logging.DEBUG),
    ],
)
def test_zap_log_level_values(flag: str, level: int) -> None:
    assert parse_args([f"--zap-log-level={flag}"]).zap_log_level == level


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--zap-log-level=warn", 'invalid log level "warn"'),
        ("--zap-log-level=0", 'invalid log level "0"'),
        ("--zap-log-level=-1", 'invalid log level "-1"'),
        ("--zap-encoder=text", 'invalid encoder value "text"'),
        ("--log-format=text", 'invalid encoder value "text"'),
        ("--zap-stacktrace-level=debug", 'invalid stacktrace level "debug"'),
        ("--zap-stacktrace-level=warn", 'invalid stacktrace level "warn"'),
        ("--zap-time-encoding=nano", 'invalid time-encoding value "nano"'),
    ],
)
def test_bad_zap_flags_are_refused_with_upstreams_text(
    flag: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args([flag])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_encoder_flags_and_the_log_format_alias() -> None:
    assert parse_args(["--zap-encoder=console"]).zap_encoder == "console"
    assert parse_args(["--zap-encoder=JSON"]).zap_encoder == "json"
    assert parse_args(["--log-format=console"]).zap_encoder == "console"
    assert parse_args([]).zap_encoder is None
    args = parse_args(["--zap-stacktrace-level=panic", "--zap-time-encoding=epoch"])
    assert (args.zap_stacktrace_level, args.zap_time_encoding) == (logging.CRITICAL, "epoch")
    assert parse_args([]).zap_time_encoding == "rfc3339nano"


# 2024-05-06T07:08:09.120300000Z as nanoseconds since the epoch
NS = 1714979289_120300000


@pytest.mark.parametrize(
    ("encoding", "value"),
    [
        ("epoch", 1714979289.1203),
        ("millis", 1714979289120.3),
        ("nanos", NS),
        ("iso8601", "2024-05-06T07:08:09.120Z"),
        ("rfc3339", "2024-05-06T07:08:09Z"),
        ("rfc3339nano", "2024-05-06T07:08:09.1203Z"),
    ],
)
def test_time_encodings_are_zaps(encoding: log.TimeEncoding, value: object) -> None:
    encoded = log.encode_time(NS, encoding)
    if isinstance(value, float):
        assert encoded == pytest.approx(value)
    else:
        assert encoded == value


def test_rfc3339nano_drops_a_whole_second_fraction_and_shows_offsets() -> None:
    import datetime as dt

    assert log.encode_time(1714979289_000000000, "rfc3339nano") == "2024-05-06T07:08:09Z"
    assert log.encode_time(1714979289_000000001, "rfc3339nano") == "2024-05-06T07:08:09.000000001Z"
    cet = dt.timezone(dt.timedelta(hours=2))
    assert log.encode_time(NS, "rfc3339", cet) == "2024-05-06T09:08:09+02:00"
    assert log.encode_time(NS, "iso8601", cet) == "2024-05-06T09:08:09.120+0200"


def test_json_values_that_are_not_json_are_rendered_as_text() -> None:
    out = io.StringIO()
    log.configure(fmt="json", stream=out)
    log.get_logger("t").info("odd values", path=argparse.Namespace(a=1), kinds={"b", "a"})
    (entry,) = lines(out)
    assert entry["path"] == "Namespace(a=1)" and entry["kinds"] == ["a", "b"]


def test_kubernetes_asyncio_response_bodies_never_reach_the_log() -> None:
    """Its REST client logs whole response bodies (Secret data) at debug; --zap-log-level=debug keeps them out."""
    out = io.StringIO()
    log.configure(fmt="json", stream=out, level="debug")
    logging.getLogger("kubernetes_asyncio.client.rest").debug(
        "response body: %s", '{"data":{"tls.key":"..."}}'
    )
    logging.getLogger("kubernetes_asyncio.client.rest").info("shown")
    assert [e["msg"] for e in lines(out)] == ["shown"]


def test_a_program_that_never_configures_gets_the_production_pipeline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # structlog's own defaults print every debug line, rendered for a terminal and unredacted:
    # what a controller written on the framework did when its program called no configure
    structlog.reset_defaults()
    assert log.ensure_configured()
    logger = log.get_logger("mine")
    logger.debug("Reconcile successful")
    logger.info("connecting", token="s3cr3t")
    assert not log.ensure_configured()  # once
    err = capsys.readouterr().err  # the stderr of the moment a line is written
    said, connecting = (json.loads(line) for line in err.splitlines())
    assert said["level"] == "info" and "manager.log.configure" in said["msg"]
    assert (connecting["msg"], connecting["token"]) == ("connecting", log.REDACTED)
    assert "Reconcile successful" not in err


def test_a_configured_program_keeps_its_pipeline() -> None:
    out = io.StringIO()
    log.configure(level=logging.DEBUG, stream=out)
    assert not log.ensure_configured()
    log.get_logger("mine").debug("kept")
    assert [line["msg"] for line in lines(out)] == ["kept"]
