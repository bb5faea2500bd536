"""Every request names its response type (wire/request.py), and the registry agrees: the
client's `Connection.request` returns what the request names without a check at each call."""

from __future__ import annotations

import typing

from minikafka.wire.messages import API, RESPONSE_OF
from minikafka.wire.request import Request


def named_response(request_type: type) -> str:
    """The type argument of the `Request[...]` a request class derives from."""
    for base in getattr(request_type, "__orig_bases__", ()):
        if typing.get_origin(base) is Request:
            (arg,) = typing.get_args(base)
            return arg.__forward_arg__ if isinstance(arg, typing.ForwardRef) else arg.__name__
    raise AssertionError(f"{request_type.__name__} does not derive from Request[...]")


def test_every_request_names_the_response_the_registry_decodes():
    for request_type, response_type in API.values():
        assert issubclass(request_type, Request), request_type
        assert named_response(request_type) == response_type.__name__, request_type
        assert RESPONSE_OF[request_type] is response_type


def test_a_request_naming_another_response_is_caught():
    class Wrong(Request["MetadataResponse"]):
        pass

    assert named_response(Wrong) != "FetchResponse"
