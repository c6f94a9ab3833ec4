"""One collector per metric name: a module's own (unregistered) collector is adopted, else ours."""

from __future__ import annotations

import sys
import types

from prometheus_client import Counter

from manager.metrics import REGISTRY
from manager.metrics._adopt import adopt


def test_adopts_the_updating_modules_collector() -> None:
    module = types.ModuleType("fake_client_metrics")
    theirs = Counter("adopt_test_requests_total", "help", ["code"], registry=None)
    module.REQUESTS = theirs  # type: ignore[attr-defined]
    sys.modules["fake_client_metrics"] = module
    try:
        adopted = adopt(
            "fake_client_metrics", "REQUESTS", Counter, "adopt_test_requests_total", "help", ["code"]
        )
    finally:
        del sys.modules["fake_client_metrics"]
    assert adopted is theirs
    theirs.labels("200").inc()
    assert REGISTRY.get_sample_value("adopt_test_requests_total", {"code": "200"}) == 1.0


def test_defines_its_own_when_the_module_is_absent() -> None:
    ours = adopt("no_such_module_here", "REQUESTS", Counter, "adopt_test_fallback_total", "help", ["code"])
    ours.labels("500").inc(2)
    assert REGISTRY.get_sample_value("adopt_test_fallback_total", {"code": "500"}) == 2.0


def test_client_metric_is_exported_once() -> None:
    from manager.metrics.client import observe_request

    observe_request(201, "post", "10.0.0.1:6443")
    assert (
        REGISTRY.get_sample_value(
            "rest_client_requests_total", {"code": "201", "method": "POST", "host": "10.0.0.1:6443"}
        )
        == 1.0
    )
