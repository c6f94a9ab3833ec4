"""``leader_election_master_status{name}``: 1 while this replica holds the lease, else 0."""

from __future__ import annotations

from prometheus_client import Gauge

from manager.metrics.registry import REGISTRY

LEADER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. "
    "'name' is the string used to identify the lease. Please make sure to group by name.",
    ["name"],
    registry=REGISTRY,
)
