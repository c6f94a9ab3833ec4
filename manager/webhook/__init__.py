"""Admission webhooks: the HTTPS server, AdmissionReview plumbing, defaulter/validator adapters."""

from manager.webhook.admission import (
    INTERNAL_ERROR_MESSAGE,
    AdmissionRequest,
    AdmissionResponse,
    DecodeError,
    Denied,
    Handler,
    allowed,
    denied,
    errored,
    patch_response,
)
from manager.webhook.custom import (
    CustomDefaulter,
    CustomValidator,
    defaulting_handler,
    mutate_path,
    validate_path,
    validating_handler,
)
from manager.webhook.server import WebhookServer

__all__ = [
    "INTERNAL_ERROR_MESSAGE",
    "AdmissionRequest",
    "AdmissionResponse",
    "CustomDefaulter",
    "CustomValidator",
    "DecodeError",
    "Denied",
    "Handler",
    "WebhookServer",
    "allowed",
    "defaulting_handler",
    "denied",
    "errored",
    "mutate_path",
    "patch_response",
    "validate_path",
    "validating_handler",
]
