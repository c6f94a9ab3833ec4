"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics."""

from manager.leaderelection.elector import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LeaderElector,
    new_identity,
)
from manager.leaderelection.lease import LEASE, LeaderElectionRecord, LeaseClient, LeaseLock

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "LEASE",
    "LeaderElectionRecord",
    "LeaderElector",
    "LeaseClient",
    "LeaseLock",
    "new_identity",
]
