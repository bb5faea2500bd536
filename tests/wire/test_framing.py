"""Framing: literal bytes, arbitrary chunking, the size cap and the broken-after-error rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minikafka.errors import LocalProtocolError, RemoteProtocolError
from minikafka.wire.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    JOIN_BELOW_BYTES,
    FrameDecoder,
    frame,
    frame_header,
    frame_parts,
)


def drain(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while (payload := decoder.next_frame()) is not None:
        out.append(payload)
    return out


# ---------------------------------------------------------------------------- encoding


def test_frame_literal_bytes():
    assert frame(b"ab") == b"\x00\x00\x00\x02ab"
    assert frame_header(1) == b"\x00\x00\x00\x01"
    assert frame_header(0x01020304) == b"\x01\x02\x03\x04"
    assert frame_header(DEFAULT_MAX_FRAME_BYTES) == b"\x04\x00\x00\x00"  # 64 MiB


@pytest.mark.parametrize("length", [-1, 0, DEFAULT_MAX_FRAME_BYTES + 1, 2**32])
def test_frame_header_rejects_what_the_peer_would_reject(length):
    with pytest.raises(LocalProtocolError, match=str(length)):
        frame_header(length)


def test_frame_respects_a_smaller_cap():
    assert frame(b"abcd", max_frame_bytes=4) == b"\x00\x00\x00\x04abcd"
    with pytest.raises(LocalProtocolError):
        frame(b"abcde", max_frame_bytes=4)


# ---------------------------------------------------------------------------- decoding


def test_decode_literal_frame():
    decoder = FrameDecoder()
    decoder.receive_data(b"\x00\x00\x00\x02ab\x00\x00\x00\x01c")
    assert decoder.next_frame() == b"ab"
    assert decoder.next_frame() == b"c"
    assert decoder.next_frame() is None
    assert decoder.buffered_bytes == 0


def test_one_byte_at_a_time():
    stream = frame(b"hello") + frame(b"x") + frame(bytes(range(256)))
    decoder = FrameDecoder()
    got = []
    for i in range(len(stream)):
        decoder.receive_data(stream[i : i + 1])
        got.extend(drain(decoder))
        # only a parsed header leaves the buffer early; nothing is lost or duplicated
        assert decoder.buffered_bytes <= 256
    assert got == [b"hello", b"x", bytes(range(256))]
    assert decoder.buffered_bytes == 0


def test_partial_frame_waits_and_buffered_bytes_counts():
    decoder = FrameDecoder()
    decoder.receive_data(b"\x00\x00")
    assert decoder.next_frame() is None
    assert decoder.buffered_bytes == 2
    decoder.receive_data(b"\x00\x03a")  # header complete: it is consumed
    assert decoder.next_frame() is None
    assert decoder.buffered_bytes == 1
    decoder.receive_data(b"bc")
    assert decoder.next_frame() == b"abc"
    assert decoder.next_frame() is None


def test_many_small_frames_in_one_chunk():
    payloads = [i.to_bytes(4, "big") * (1 + i % 3) for i in range(10_000)]
    decoder = FrameDecoder()
    decoder.receive_data(b"".join(frame(p) for p in payloads))
    assert drain(decoder) == payloads
    assert decoder.buffered_bytes == 0


def test_twenty_megabyte_frame_in_64k_chunks():
    body = bytes(range(256)) * (20 * 1024 * 1024 // 256)
    stream = frame(body)
    decoder = FrameDecoder()
    chunk = 64 * 1024
    for start in range(0, len(stream), chunk):
        decoder.receive_data(stream[start : start + chunk])
        if start + chunk < len(stream):
            assert decoder.next_frame() is None
    out = decoder.next_frame()
    assert out is not None and len(out) == len(body) and out == body
    assert decoder.buffered_bytes == 0


def test_frame_equal_to_chunk_is_returned_without_copy():
    body = b"z" * 1000
    decoder = FrameDecoder()
    decoder.receive_data(frame_header(len(body)))
    decoder.receive_data(body)
    assert decoder.next_frame() is body


def test_bytearray_and_memoryview_input_are_copied():
    buf = bytearray(frame(b"abc"))
    decoder = FrameDecoder()
    decoder.receive_data(memoryview(buf)[:5])
    decoder.receive_data(buf[5:])
    buf[:] = b"\xff" * len(buf)  # the caller reuses its receive buffer
    assert decoder.next_frame() == b"abc"


@given(
    payloads=st.lists(st.binary(min_size=1, max_size=300), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
)
def test_any_chunking_yields_the_same_frames(payloads, cuts):
    stream = b"".join(frame(p) for p in payloads)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    decoder = FrameDecoder()
    got = []
    for a, b in zip(points, points[1:], strict=False):
        decoder.receive_data(stream[a:b])
        got.extend(drain(decoder))
    decoder.receive_data(b"")
    got.extend(drain(decoder))
    assert got == payloads
    assert decoder.at_eof


# ---------------------------------------------------------------------------- peer errors


def test_oversize_header_rejected_before_body_arrives():
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(RemoteProtocolError, match="1025 bytes, over the cap of 1024"):
        decoder.receive_data(b"\x00\x00\x04\x01")  # 1025: no body byte sent yet
    assert decoder.buffered_bytes == 0


def test_oversize_default_cap_on_header_split_across_chunks():
    decoder = FrameDecoder()
    decoder.receive_data(b"\x04\x00")
    assert decoder.next_frame() is None
    with pytest.raises(RemoteProtocolError, match="over the cap"):
        decoder.receive_data(b"\x00\x01")  # 64 MiB + 1


def test_oversize_header_of_a_later_frame_is_reported_after_good_frames():
    decoder = FrameDecoder(max_frame_bytes=8)
    decoder.receive_data(frame(b"ok") + b"\x00\x00\x00\x09" + b"x" * 9)
    assert decoder.next_frame() == b"ok"
    with pytest.raises(RemoteProtocolError, match="over the cap"):
        decoder.next_frame()


def test_max_size_frame_is_accepted():
    decoder = FrameDecoder(max_frame_bytes=8)
    decoder.receive_data(frame(b"12345678"))
    assert decoder.next_frame() == b"12345678"


def test_zero_length_frame_rejected():
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError, match="zero-length"):
        decoder.receive_data(b"\x00\x00\x00\x00")


def test_eof_in_the_middle_of_a_frame():
    decoder = FrameDecoder()
    decoder.receive_data(frame(b"first") + b"\x00\x00\x00\x05ab")
    decoder.receive_data(b"")
    assert decoder.next_frame() == b"first"  # complete frames before EOF still come out
    with pytest.raises(RemoteProtocolError, match="closed inside a frame"):
        decoder.next_frame()


def test_eof_in_the_middle_of_a_header():
    decoder = FrameDecoder()
    decoder.receive_data(b"\x00\x00")
    decoder.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="frame header"):
        decoder.next_frame()


def test_clean_eof():
    decoder = FrameDecoder()
    decoder.receive_data(frame(b"a"))
    decoder.receive_data(b"")
    assert decoder.at_eof
    assert decoder.next_frame() == b"a"
    assert decoder.next_frame() is None
    assert decoder.next_frame() is None


def test_data_after_eof_is_our_bug():
    decoder = FrameDecoder()
    decoder.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"x")


@pytest.mark.parametrize(
    "bad", [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff"], ids=["zero", "oversize"]
)
def test_broken_after_error(bad):
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError):
        decoder.receive_data(bad)
    with pytest.raises(RemoteProtocolError, match="broken"):
        decoder.next_frame()
    with pytest.raises(RemoteProtocolError, match="broken"):
        decoder.receive_data(frame(b"fine"))
    with pytest.raises(RemoteProtocolError, match="broken"):
        decoder.next_frame()


def test_broken_after_eof_error():
    decoder = FrameDecoder()
    decoder.receive_data(b"\x00\x00\x00\x02a")
    decoder.receive_data(b"")
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()
    with pytest.raises(RemoteProtocolError, match="broken"):
        decoder.next_frame()


def test_invalid_cap_rejected():
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_bytes=0)


def test_frame_parts_join_small_payloads_and_leave_large_ones_uncopied():
    small = b"x" * (JOIN_BELOW_BYTES - 1)
    assert frame_parts(small) == [frame(small)]  # one write
    large = b"y" * JOIN_BELOW_BYTES
    header, body = frame_parts(large)
    assert header == frame_header(len(large)) and body is large  # the payload object itself
    decoder = FrameDecoder()
    for part in (header, body):
        decoder.receive_data(part)
    assert decoder.next_frame() == large
    with pytest.raises(LocalProtocolError):
        frame_parts(b"z" * 100, max_frame_bytes=10)
