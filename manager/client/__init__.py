"""Talking to one API server: the HTTP transport, discovery (the REST mapper), the request error
tree, patches, the ``Client`` and the ``Reader``/``Writer``/``ClientProtocol`` seams it implements."""

from manager.client.client import Client, Preconditions, StatusSubresourceWriter, ignore_not_found
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
from manager.client.interfaces import (
    ClientProtocol,
    DeleteOptions,
    FieldIndexer,
    ListOptions,
    Reader,
    StatusWriter,
    Writer,
)
from manager.client.patch import Patch, merge_from
from manager.client.rest import RestTransport

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Client",
    "ClientError",
    "ClientProtocol",
    "Conflict",
    "DeleteOptions",
    "FieldIndexer",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "ListOptions",
    "NotFound",
    "Patch",
    "Preconditions",
    "Reader",
    "RequestError",
    "RestTransport",
    "ServerError",
    "StatusSubresourceWriter",
    "StatusWriter",
    "TooManyRequests",
    "TransportError",
    "Writer",
    "ignore_not_found",
    "merge_from",
]
