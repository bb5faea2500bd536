"""minikafka/wire: the pure protocol (messages, msgpack codec, framing, correlation)."""

from minikafka.wire.codec import (
    MAX_LIST_LEN,
    MAX_STR_BYTES,
    RequestHeader,
    UnknownApiError,
    UnsupportedVersionError,
    decode_body,
    decode_request,
    decode_response,
    decode_response_envelope,
    encode_request,
    encode_response,
)
from minikafka.wire.correlation import Correlator
from minikafka.wire.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, frame, frame_header
from minikafka.wire.messages import API, API_KEY_OF, SUPPORTED_VERSIONS, ApiKey

__all__ = [
    "API",
    "API_KEY_OF",
    "DEFAULT_MAX_FRAME_BYTES",
    "MAX_LIST_LEN",
    "MAX_STR_BYTES",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "Correlator",
    "FrameDecoder",
    "RequestHeader",
    "UnknownApiError",
    "UnsupportedVersionError",
    "decode_body",
    "decode_request",
    "decode_response",
    "decode_response_envelope",
    "encode_request",
    "encode_response",
    "frame",
    "frame_header",
]
