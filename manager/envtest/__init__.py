"""envtest for Python: real etcd and kube-apiserver (and optionally a full cluster) on loopback."""

from manager.envtest.assets import ensure
from manager.envtest.environment import ControlPlaneInfo, Environment, stop_detached
from manager.envtest.errors import AssetBuildError, EnvtestError, StartError

__all__ = [
    "AssetBuildError",
    "ControlPlaneInfo",
    "Environment",
    "EnvtestError",
    "StartError",
    "ensure",
    "stop_detached",
]
