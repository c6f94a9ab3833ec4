"""A small async Kubernetes REST client for the runner: discovery, create, get, replace, patch,
list, delete."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from manager.config import RestConfig, load_kubeconfig
from manager.envtest.environment import decoded_response


class KubeError(RuntimeError):
    """The cluster answered a request with an error the runner cannot go on from."""


class Kube:
    """One cluster, reached through a kubeconfig (admin rights expected)."""

    def __init__(self, config: RestConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    @classmethod
    async def from_kubeconfig(cls, path: str | Path) -> Kube:
        return cls(await load_kubeconfig(path))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        """One request; a 429 (e.g. a new CRD's storage still initialising) is retried for ~30 s."""
        for _ in range(30):
            status, decoded = await self._request_once(method, path, body, content_type)
            if status != 429:
                break
            await asyncio.sleep(1)
        return status, decoded

    async def _request_once(self, method: str, path: str, body: Any, content_type: str) -> tuple[int, Any]:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self.config.ssl_context or False)
            self._session = aiohttp.ClientSession(connector=connector)
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if auth := await self.config.authorization():
            headers["Authorization"] = auth
        data = json.dumps(body) if body is not None else None
        async with self._session.request(
            method,
            self.config.host.rstrip("/") + path,
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=60),
        ) as response:
            return await decoded_response(response)

    @staticmethod
    def _base(api_version: str) -> str:
        return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"

    async def resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """(plural, namespaced) for a kind, or None when the cluster does not serve it."""
        if api_version not in self._resources:
            status, body = await self.request("GET", self._base(api_version))
            if status != 200:
                return None
            self._resources[api_version] = {
                r["kind"]: (r["name"], r["namespaced"]) for r in body["resources"] if "/" not in r["name"]
            }
        return self._resources[api_version].get(kind)

    def forget_discovery(self) -> None:
        self._resources.clear()

    async def collection_path(self, api_version: str, kind: str, namespace: str | None) -> str:
        found = await self.resource(api_version, kind)
        if found is None:
            raise KubeError(f"{api_version} {kind} is not served")
        plural, namespaced = found
        ns = f"/namespaces/{namespace}" if namespaced and namespace else ""
        return f"{self._base(api_version)}{ns}/{plural}"

    async def create(self, obj: dict[str, Any], namespace: str | None) -> tuple[int, Any]:
        path = await self.collection_path(obj["apiVersion"], obj["kind"], namespace)
        return await self.request("POST", path, obj)

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None) -> tuple[int, Any]:
        path = await self.collection_path(api_version, kind, namespace)
        return await self.request("GET", f"{path}/{name}")

    async def replace(self, obj: dict[str, Any], namespace: str | None) -> tuple[int, Any]:
        """PUT the whole object (an update: its resourceVersion must be the stored one)."""
        path = await self.collection_path(obj["apiVersion"], obj["kind"], namespace)
        return await self.request("PUT", f"{path}/{obj['metadata']['name']}", obj)

    async def patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: Any, patch_type: str
    ) -> tuple[int, Any]:
        path = await self.collection_path(api_version, kind, namespace)
        content_type = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        return await self.request("PATCH", f"{path}/{name}", patch, content_type=content_type)

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> tuple[int, Any]:
        path = await self.collection_path(api_version, kind, namespace)
        return await self.request("DELETE", f"{path}/{name}", {"propagationPolicy": "Background"})

    async def list(self, api_version: str, kind: str, namespace: str | None) -> list[dict[str, Any]] | None:
        """The objects of a kind in a namespace; None when the kind is not served."""
        if await self.resource(api_version, kind) is None:
            return None
        path = await self.collection_path(api_version, kind, namespace)
        status, body = await self.request("GET", path)
        if status != 200:
            raise KubeError(f"listing {path} answered {status}: {body}")
        items: list[dict[str, Any]] = body.get("items", [])
        return items
