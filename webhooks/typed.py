"""The typed decode step of every webhook we serve, as the Go managers' structs do it.

A Go webhook decodes the AdmissionReview's object into its struct before the handler runs:
an ill-typed object is answered 400 with encoding/json's message, and a defaulting webhook
answers with the patch to the re-encoded struct (fields Go always writes included). The facts
are in ``trainer.api.gocodec``; this module adapts them to the framework's ``decode``/``encode``
callables.
"""

from __future__ import annotations

from collections.abc import Callable

from manager.meta.object import Json as Object
from manager.meta.object import json_copy
from manager.webhook import DecodeError
from trainer.api import gocodec


def decoder(
    api_version: str, kind: str, *, typed_view: bool = False, types_file: str = gocodec.TYPES_FILE
) -> Callable[[Object | None], Object]:
    """Check ``raw`` against the Go struct (``DecodeError`` with Go's text) and return a copy;
    with ``typed_view`` the copy is what the struct would hold, zero values written out.
    ``types_file`` names the Go types of the binary being mirrored (``gocodec``)."""
    codec = gocodec.codec_for(api_version, kind, types_file)

    def decode(raw: Object | None) -> Object:
        try:
            codec.check(raw)
        except gocodec.GoDecodeError as err:
            raise DecodeError(str(err)) from None
        assert raw is not None
        obj = codec.nulls_to_zero(json_copy(raw))
        return codec.encode(obj) if typed_view else obj

    return decode


def encoder(
    api_version: str, kind: str, *, types_file: str = gocodec.TYPES_FILE
) -> Callable[[Object], Object]:
    """``json.Marshal`` of the struct the defaulter changed."""
    codec = gocodec.codec_for(api_version, kind, types_file)
    return codec.encode
