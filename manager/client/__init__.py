"""The API client: errors, patches, the HTTP transport and the client itself."""

from manager.client.client import Client, Preconditions, StatusWriter, ignore_not_found
from manager.client.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    ClientError,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    NotFound,
    RequestError,
    ServerError,
    TooManyRequests,
    TransportError,
)
from manager.client.patch import Patch, merge_from
from manager.client.rest import RestTransport

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Client",
    "ClientError",
    "Conflict",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "NotFound",
    "Patch",
    "Preconditions",
    "RequestError",
    "RestTransport",
    "ServerError",
    "StatusWriter",
    "TooManyRequests",
    "TransportError",
    "ignore_not_found",
    "merge_from",
]
