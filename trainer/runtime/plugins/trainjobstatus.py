"""TrainJobStatus plugin (upstream v2.2 ``trainjobstatus``, KEP-2779), registered only with the gate on.

Why: a trainer pod can report progress only if it knows where to send it, can verify the
server's certificate and can prove which pod it is. So every trainer container gets

* ``KUBEFLOW_TRAINER_SERVER_URL``: ``https://<webhook service>.<manager namespace>.svc:<statusServer.port>``
  plus ``/apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status``;
* ``KUBEFLOW_TRAINER_SERVER_CA_CERT``: ``/var/run/secrets/kubeflow/trainer/ca.crt``;
* ``KUBEFLOW_TRAINER_SERVER_TOKEN``: ``/var/run/secrets/kubeflow/trainer/token``;

and the trainer PodSet one projected volume ``kubeflow-trainer-token`` holding a service-account
token with the TrainJob's own audience (1 h, rotated by the kubelet) and ``ca.crt`` from the
ConfigMap ``<trainjob>-tls-config``, which this plugin builds from the webhook Secret's ``ca.crt``
(owned by the TrainJob, so it goes with it). The names are upstream v2.2's exactly.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from manager.client.errors import NotFound
from trainer.api import trainer_constants as tc
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.runtime.apply import upsert_env_vars, upsert_volume_mounts, upsert_volumes
from trainer.runtime.errors import RuntimeFailure
from trainer.runtime.info import Info
from trainer.runtime.objects import SECRET_GVK, owner_reference
from trainer.runtime.plugins.base import PluginContext

__all__ = [
    "CA_CERT_KEY",
    "CONFIG_MOUNT_PATH",
    "ENV_CA_CERT",
    "ENV_SERVER_URL",
    "ENV_TOKEN",
    "TOKEN_VOLUME_NAME",
    "StatusServerSettings",
    "TrainJobStatus",
    "configure",
    "settings",
    "status_path",
    "tls_config_map_name",
    "token_audience",
]

Json = dict[str, Any]

ENV_SERVER_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
CONFIG_MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
CA_CERT_FILE = "ca.crt"
TOKEN_FILE = "token"
TOKEN_VOLUME_NAME = "kubeflow-trainer-token"
TOKEN_EXPIRY_SECONDS = 3600
CA_CERT_KEY = "ca.crt"
TOKEN_AUDIENCE_PREFIX = "trainer.kubeflow.org"


def status_path(namespace: str, name: str) -> str:
    """The endpoint path for one TrainJob (upstream ``StatusUrl``)."""
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def token_audience(namespace: str, name: str) -> str:
    """The audience a pod's token must carry to update this TrainJob (upstream ``TokenAudience``)."""
    return f"{TOKEN_AUDIENCE_PREFIX}/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def tls_config_map_name(trainjob_name: str) -> str:
    return f"{trainjob_name}-tls-config"


@dataclass(frozen=True)
class StatusServerSettings:
    """Where the status server is reachable from pods, and where its CA lives."""

    service_name: str = "kubeflow-trainer-controller-manager"
    namespace: str = "kubeflow-system"
    port: int = 10443
    secret_name: str = "kubeflow-trainer-webhook-cert"

    def url(self, namespace: str, name: str) -> str:
        return f"https://{self.service_name}.{self.namespace}.svc:{self.port}{status_path(namespace, name)}"


_settings = StatusServerSettings()


def configure(value: StatusServerSettings) -> None:
    """Set at start-up from the Configuration (certManagement names, statusServer.port)."""
    global _settings
    _settings = value


def settings() -> StatusServerSettings:
    return _settings


def _key(trainjob: TrainJob) -> tuple[str, str]:
    meta = trainjob.metadata
    return (meta.namespace or "", meta.name or "") if meta is not None else ("", "")


class TrainJobStatus:
    name = "TrainJobStatus"

    def __init__(self, context: PluginContext, server: StatusServerSettings | None = None) -> None:
        self._reader = context.reader
        self._server = server

    @property
    def server(self) -> StatusServerSettings:
        return self._server or _settings

    def enforce_ml_policy(self, info: Info | None, trainjob: TrainJob | None) -> None:
        """Env and mount in every trainer container, the projected volume in the trainer PodSet."""
        if info is None or trainjob is None:
            return
        namespace, name = _key(trainjob)
        pod_set = info.find_pod_set_by_ancestor(tc.AncestorTrainer)
        if pod_set is None:
            return
        env = [
            {"name": ENV_SERVER_URL, "value": self.server.url(namespace, name)},
            {"name": ENV_CA_CERT, "value": f"{CONFIG_MOUNT_PATH}/{CA_CERT_FILE}"},
            {"name": ENV_TOKEN, "value": f"{CONFIG_MOUNT_PATH}/{TOKEN_FILE}"},
        ]
        mount = {"name": TOKEN_VOLUME_NAME, "mountPath": CONFIG_MOUNT_PATH, "readOnly": True}
        for container in pod_set.containers:
            upsert_env_vars(container.env, env)
            upsert_volume_mounts(container.volume_mounts, [mount])
        volume = {
            "name": TOKEN_VOLUME_NAME,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": token_audience(namespace, name),
                            "expirationSeconds": TOKEN_EXPIRY_SECONDS,
                            "path": TOKEN_FILE,
                        }
                    },
                    {
                        "configMap": {
                            "name": tls_config_map_name(name),
                            "items": [{"key": CA_CERT_KEY, "path": CA_CERT_FILE}],
                        }
                    },
                ]
            },
        }
        upsert_volumes(pod_set.volumes, [volume])

    async def build(self, info: Info | None, trainjob: TrainJob | None) -> list[Json]:
        """The ``<trainjob>-tls-config`` ConfigMap with the webhook CA (the status server's CA)."""
        if info is None or trainjob is None:
            return []
        server = self.server
        try:
            secret = await self._reader.get(SECRET_GVK, server.secret_name, server.namespace)
        except NotFound as err:
            raise RuntimeFailure(
                f"failed to look up status server tls secret {server.namespace}/{server.secret_name}: {err}"
            ) from err
        encoded = ((secret or {}).get("data") or {}).get(CA_CERT_KEY)
        if not encoded:
            raise RuntimeFailure("failed to find status server ca.crt in tls secret")
        ca_pem = base64.b64decode(encoded).decode()
        namespace, name = _key(trainjob)
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": tls_config_map_name(name),
                    "namespace": namespace,
                    "ownerReferences": [owner_reference(trainjob)],
                },
                "data": {CA_CERT_KEY: ca_pem},
            }
        ]
