"""Logging: JSON lines carrying the reconcile context; secrets never rendered."""

from __future__ import annotations

import io
import json

import structlog

from manager import log


def test_json_lines_carry_bound_context_and_redact_secrets() -> None:
    out = io.StringIO()
    log.configure(fmt="json", stream=out, level="DEBUG")
    try:
        with log.bound(controller="trainjob", namespace="ns", name="job", reconcileID="r1"):
            log.get_logger("test").info("reconciling", token="s3cr3t", replicas=2)
        log.get_logger("test").debug("outside")
    finally:
        structlog.reset_defaults()
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["event"] == "reconciling"
    assert {k: first[k] for k in ("controller", "namespace", "name", "reconcileID")} == {
        "controller": "trainjob",
        "namespace": "ns",
        "name": "job",
        "reconcileID": "r1",
    }
    assert first["token"] == "[REDACTED]" and "s3cr3t" not in out.getvalue()
    assert first["level"] == "info" and "ts" in first
    assert "controller" not in second, "context does not outlive the block"


def test_level_filters_and_console_format() -> None:
    out = io.StringIO()
    log.configure(fmt="console", stream=out, level="INFO")
    try:
        log.get_logger("test").debug("hidden")
        log.get_logger("test").info("shown", kind="TrainJob")
    finally:
        structlog.reset_defaults()
    text = out.getvalue()
    assert "hidden" not in text
    assert "shown" in text and "kind=TrainJob" in text
