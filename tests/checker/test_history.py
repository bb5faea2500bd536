"""The experiment input format (minikafka/checker/history.py): parsing, pairing, rejection.

Every malformed input must raise `HistoryError` with a one-line message naming where (line and,
once known, the op's index) and which field is wrong.
"""

from __future__ import annotations

import json

import pytest

from minikafka.checker.history import (
    HistoryError,
    load_history,
    load_jsonl,
    parse_dumps,
    parse_history,
)
from minikafka.errors import MiniKafkaError


def op(index, process, type_, f, **kw):
    return {"index": index, "time": index * 0.5, "process": process, "type": type_, "f": f, **kw}


SEND = {"topic": "t", "partition": 0}
GOOD = [
    op(0, "p0", "invoke", "send", **SEND, values=[1, 2]),
    op(1, "c0", "invoke", "poll", **SEND, offset=0),
    op(2, "p0", "ok", "send", offset=0),
    op(3, "c0", "ok", "poll", records=[[0, 1], [1, 2]]),
    op(4, "c0", "info", "seek", **SEND, offset=0),
    op(5, "p0", "invoke", "send", **SEND, values=[3]),
    op(6, "p0", "fail", "send", **SEND, values=[3], error="NOT_LEADER_OR_FOLLOWER"),
    op(7, "p0", "invoke", "send", **SEND, values=[4]),
    op(8, "r", "invoke", "final-read", **SEND),
    op(9, "r", "ok", "final-read", **SEND, records=[[0, 1], [1, 2]], log_end_offset=2),
]


def test_a_good_history_pairs_each_invoke_with_its_completion():
    h = parse_history(GOOD)
    assert len(h.ops) == 10 and [s.index for s in h.seeks] == [4]
    sends = [o for o in h.operations if o.f == "send"]
    assert [(o.index, o.type) for o in sends] == [(0, "ok"), (5, "fail"), (7, "info")]
    assert sends[0].values == (1, 2) and sends[0].base_offset == 0
    assert sends[1].error == "NOT_LEADER_OR_FOLLOWER" and sends[1].base_offset is None
    # the invoke at index 7 never completed: indeterminate
    assert sends[2].completion is None and sends[2].error == "no completion"
    (poll,) = [o for o in h.operations if o.f == "poll"]
    assert poll.fetch_offset == 0 and poll.records == ((0, 1), (1, 2)) and poll.tp == ("t", 0)
    (final,) = [o for o in h.operations if o.f == "final-read"]
    assert final.type == "ok" and final.completion.log_end_offset == 2


def test_ops_are_frozen():
    h = parse_history(GOOD)
    with pytest.raises(AttributeError):
        h.ops[0].index = 9  # type: ignore[misc]


def test_an_integer_process_is_accepted_as_its_name():
    h = parse_history(
        [op(0, 3, "invoke", "send", **SEND, values=[1]), op(1, 3, "ok", "send", offset=0)]
    )
    assert h.operations[0].process == "3"


def _replace(i, **changes):
    docs = [dict(d) for d in GOOD]
    docs[i].update(changes)
    return [{k: v for k, v in d.items() if v is not DROP} for d in docs]


DROP = object()


@pytest.mark.parametrize(
    ("docs", "where", "field"),
    [
        (_replace(3, index=2), "line 4", "index"),
        (_replace(0, index=-1), "line 1", "index"),
        (_replace(0, index=True), "line 1", "index"),
        (_replace(1, time="soon"), "line 2", "time"),
        (_replace(1, time=float("nan")), "line 2", "time"),
        (_replace(1, type="done"), "line 2", "type"),
        (_replace(1, f="produce"), "line 2", "'f'"),
        (_replace(1, process=None), "line 2", "process"),
        (_replace(0, values=[]), "line 1", "values"),
        (_replace(0, values=[1, "2"]), "line 1", "values"),
        (_replace(0, values=[1, True]), "line 1", "values"),
        (_replace(0, topic=DROP), "line 1", "topic"),
        (_replace(0, partition=-1), "line 1", "partition"),
        (_replace(1, offset=DROP), "line 2", "offset"),
        (_replace(2, offset=DROP), "line 3", "offset"),
        (_replace(3, records=[[0, 1], [1]]), "line 4", "records"),
        (_replace(3, records=[[0, 1], [1, None]]), "line 4", "records"),
        (_replace(3, records={"0": 1}), "line 4", "records"),
        (_replace(9, log_end_offset=DROP), "line 10", "log_end_offset"),
        (_replace(6, error=DROP), "line 7", "error"),
        (_replace(4, type="ok"), "line 5", "type"),
        (_replace(4, offset=DROP), "line 5", "offset"),
    ],
)
def test_a_malformed_field_is_named_with_its_line(docs, where, field):
    with pytest.raises(HistoryError) as e:
        parse_history(docs)
    msg = str(e.value)
    assert where in msg and field in msg and "\n" not in msg, msg


@pytest.mark.parametrize(
    ("docs", "words"),
    [
        # a completion whose process has nothing outstanding
        ([op(0, "p", "ok", "send", offset=0)], ("index 0", "without an invoke")),
        # a second invoke while the first is outstanding
        (
            [
                op(0, "p", "invoke", "send", **SEND, values=[1]),
                op(1, "p", "invoke", "send", **SEND, values=[2]),
            ],
            ("index 1", "outstanding", "index 0"),
        ),
        # a completion of another function
        (
            [
                op(0, "p", "invoke", "send", **SEND, values=[1]),
                op(1, "p", "ok", "poll", records=[]),
            ],
            ("index 1", "'f'", "send"),
        ),
        # a completion naming another partition than its invoke
        (
            [
                op(0, "p", "invoke", "send", **SEND, values=[1]),
                op(1, "p", "ok", "send", topic="t", partition=1, offset=0),
            ],
            ("index 1", "partition"),
        ),
        # a completion repeating other values than its invoke
        (
            [
                op(0, "p", "invoke", "send", **SEND, values=[1]),
                op(1, "p", "info", "send", values=[2], error="x"),
            ],
            ("index 1", "values"),
        ),
        # a seek in the middle of an outstanding poll
        (
            [
                op(0, "c", "invoke", "poll", **SEND, offset=0),
                op(1, "c", "info", "seek", **SEND, offset=0),
            ],
            ("index 1", "seek", "outstanding"),
        ),
        # the workload never reuses a value: the checker keys everything by value
        (
            [
                op(0, "p", "invoke", "send", **SEND, values=[1]),
                op(1, "p", "fail", "send", error="x"),
                op(2, "q", "invoke", "send", topic="u", partition=3, values=[1]),
            ],
            ("index 2", "values", "value 1", "index 0"),
        ),
        ([op(0, "p", "invoke", "send", **SEND, values=[5, 5])], ("index 0", "values", "value 5")),
        (["not an object"], ("line 1", "JSON object")),
    ],
)
def test_a_malformed_pairing_is_rejected(docs, words):
    with pytest.raises(HistoryError) as e:
        parse_history(docs)
    msg = str(e.value)
    assert all(w in msg for w in words) and "\n" not in msg, msg


def test_history_error_is_the_projects_error_and_a_value_error():
    assert issubclass(HistoryError, MiniKafkaError) and issubclass(HistoryError, ValueError)


def test_load_history_reads_json_lines(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in GOOD))
    assert load_history(path) == parse_history(GOOD)


def test_load_history_names_the_file_and_line_of_bad_json(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(GOOD[0]) + "\n" + '{"index": 1,\n')
    with pytest.raises(HistoryError, match=r"history.jsonl line 2: not JSON"):
        load_history(path)


def test_load_history_names_the_file_in_field_errors(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(GOOD[0]) + "\n" + json.dumps({**GOOD[1], "time": None}) + "\n")
    with pytest.raises(HistoryError, match=r"history.jsonl line 2 \(index 1\): field 'time'"):
        load_history(path)


def test_a_blank_line_is_rejected_rather_than_skipped(tmp_path):
    # skipping it would make every later line number wrong in messages
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(GOOD[0]) + "\n\n" + json.dumps(GOOD[1]) + "\n")
    with pytest.raises(HistoryError, match="line 2: blank line"):
        load_jsonl(path)


# ---------------------------------------------------------------------------------- replica dumps

DUMP = {
    "node": 1,
    "topic": "t",
    "partition": 0,
    "high_watermark": 2,
    "log_end_offset": 3,
    "records": [[0, 1], [1, 2], [2, 9]],
}


def test_dumps_parse_into_frozen_records():
    (d,) = parse_dumps([DUMP])
    assert (d.node, d.tp, d.high_watermark, d.log_end_offset) == (1, ("t", 0), 2, 3)
    assert d.records == ((0, 1), (1, 2), (2, 9))


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({**DUMP, "node": "1"}, "node"),
        ({**DUMP, "high_watermark": None}, "high_watermark"),
        ({**DUMP, "records": [[0]]}, "records"),
        ({k: v for k, v in DUMP.items() if k != "log_end_offset"}, "log_end_offset"),
    ],
)
def test_a_malformed_dump_names_its_field(doc, field):
    with pytest.raises(HistoryError) as e:
        parse_dumps([DUMP | {"node": 2}, doc])
    assert "line 2" in str(e.value) and field in str(e.value)


def test_two_dumps_of_one_replica_are_rejected():
    with pytest.raises(HistoryError, match="line 2.*node 1.*twice"):
        parse_dumps([DUMP, DUMP])
