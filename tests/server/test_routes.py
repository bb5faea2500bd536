"""The dispatch tables (server/routes.py): a request's handler is found by its type, the first
component to register a type keeps it, and every API a listener admits has a handler."""

from __future__ import annotations

import click

from minikafka.cli.main import COMMANDS, main
from minikafka.kafka.codec import SUPPORTED
from minikafka.server.kafka_apis import KafkaApis
from minikafka.server.metadata_cache import MetadataCache
from minikafka.server.routes import Call, RouteTable
from minikafka.wire.messages import MetadataRequest, ProduceRequest


def _answers(name: str):  # noqa: ANN202 - a handler
    async def handler(body: object, call: Call) -> object:
        return (name, type(body).__name__, call.client_id)

    return handler


async def test_a_request_goes_to_the_handler_of_its_type() -> None:
    table = RouteTable({ProduceRequest: _answers("broker")})
    reply = await table.answer(ProduceRequest(acks=1, timeout_ms=1, partitions=[]), Call("c"))
    assert reply == ("broker", "ProduceRequest", "c")
    assert await table.answer(MetadataRequest(topics=None)) is NotImplemented
    assert table.handler(MetadataRequest(topics=None)) is None


async def test_the_first_component_registered_keeps_a_type() -> None:
    # A combined node registers its controller first: it answers Metadata, not the broker.
    table = RouteTable({MetadataRequest: _answers("controller")})
    table.register({MetadataRequest: _answers("broker"), ProduceRequest: _answers("broker")})
    assert (await table.answer(MetadataRequest(topics=None)))[0] == "controller"
    assert table.serves() == {MetadataRequest, ProduceRequest}


def test_the_kafka_listener_has_a_handler_for_every_api_it_admits() -> None:
    apis = KafkaApis(cache=MetadataCache(), cluster_id="c")
    assert set(apis.handlers) == set(SUPPORTED)


def test_every_lazy_command_loads_under_its_name() -> None:
    ctx = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name, (name, command)
    assert set(COMMANDS) <= set(main.list_commands(ctx))
