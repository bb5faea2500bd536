"""Kafka's binary protocol, sans-IO, for the second listener real Kafka clients connect to.

`codec.py`: requests in, responses out, via kio (dataclasses generated from Kafka's own
`clients/src/main/resources/common/message/*.json`). `apis.py`: the pure handlers that need no
broker state beyond what is passed in. Framing (the 4-byte length) lives in `wire/framing.py`;
everything here takes and returns payloads without it.
"""
