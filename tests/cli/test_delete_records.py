"""`minikafka delete-records`' offset file (cli/delete_records.py): Kafka's
DeleteRecordsCommand JSON, refused in one line naming the form."""

from __future__ import annotations

import pytest

from minikafka.cli.delete_records import parse_offset_json
from minikafka.common import TopicPartition
from minikafka.errors import ConfigError


def test_kafkas_offset_file_is_read_per_partition():
    text = (
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "offset": 3},'
        ' {"topic": "t", "partition": 1, "offset": -1}]}'
    )
    assert parse_offset_json(text) == {TopicPartition("t", 0): 3, TopicPartition("t", 1): -1}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "{}",
        '{"partitions": []}',
        '{"partitions": [{"topic": "t", "partition": 0}]}',
        '{"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}',
        '{"partitions": [{"topic": "t", "partition": 0, "offset": "3"}]}',
        '{"partitions": [{"topic": "t", "partition": -1, "offset": 3}]}',
    ],
)
def test_a_bad_offset_file_names_the_form(text):
    with pytest.raises(ConfigError, match=r'expected \{"version": 1, "partitions"'):
        parse_offset_json(text)


def test_a_partition_given_twice_is_refused():
    text = (
        '{"partitions": [{"topic": "t", "partition": 0, "offset": 3},'
        ' {"topic": "t", "partition": 0, "offset": 5}]}'
    )
    with pytest.raises(ConfigError, match="t-0 is given twice"):
        parse_offset_json(text)
