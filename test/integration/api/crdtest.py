"""Helpers for the CRD tests: raw requests, so the 422 body and its message can be checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from manager.envtest import Environment


@dataclass
class Resource:
    """One custom resource collection on the test control plane."""

    env: Environment
    group: str
    version: str
    plural: str
    namespace: str | None

    @property
    def base(self) -> str:
        ns = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"/apis/{self.group}/{self.version}{ns}/{self.plural}"

    async def create(self, obj: dict[str, Any]) -> tuple[int, Any]:
        return await self.env.request("POST", self.base, obj)

    async def get(self, name: str) -> dict[str, Any]:
        status, body = await self.env.request("GET", f"{self.base}/{name}")
        assert status == 200, body
        return dict(body)

    async def replace(self, obj: dict[str, Any]) -> tuple[int, Any]:
        return await self.env.request("PUT", f"{self.base}/{obj['metadata']['name']}", obj)

    async def replace_status(self, obj: dict[str, Any]) -> tuple[int, Any]:
        return await self.env.request("PUT", f"{self.base}/{obj['metadata']['name']}/status", obj)

    async def apply(self, obj: dict[str, Any], manager: str) -> tuple[int, Any]:
        return await self.env.request(
            "PATCH",
            f"{self.base}/{obj['metadata']['name']}?fieldManager={manager}&force=true",
            obj,
            content_type="application/apply-patch+yaml",
        )

    async def delete(self, name: str) -> None:
        await self.env.request("DELETE", f"{self.base}/{name}")


def assert_invalid(status: int, body: Any, message: str) -> None:
    """A 422 Invalid whose text carries the expected (upstream) message."""
    assert status == 422, body
    assert body["reason"] == "Invalid", body
    assert message in body["message"], body["message"]
