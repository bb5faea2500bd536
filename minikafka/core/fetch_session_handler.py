"""The follower's side of a fetch session (KIP-227; Kafka's FetchSessionHandler), sans IO.

Each fetch, the replica fetcher says which partitions it wants now and their fetch state
(`build`); the handler turns that into a full request (a new session) or an incremental one:
- partitions not in the session, or whose fetch state changed (fetch offset, epochs, max bytes),
  are sent; unchanged ones are not (the leader keeps them);
- partitions in the session not wanted this time are `forgotten` (Kafka's toForget): a delayed
  partition, or one the follower-side throttle leaves out, leaves the session and comes back as
  an addition when it is wanted again.
A response (`handle_response`) confirms the request: the session now holds what was wanted, the
next epoch follows (wrapping to 1). FETCH_SESSION_ID_NOT_FOUND starts a new session
(FetchMetadata.INITIAL); any other session error, or a lost response (`on_error`, e.g. a new
connection), closes the session with the next full fetch (nextCloseExisting). A full fetch whose
response has no session id (the leader had no slot) is followed by another full one.
With `enabled` False every fetch is sessionless (FINAL_EPOCH), today's behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from minikafka.core.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)
from minikafka.core.types import TopicPartition
from minikafka.errors import ErrorCode
from minikafka.wire.messages import FetchPartition, ForgottenPartition

SESSION_ERRORS = frozenset(
    {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRequest:
    """What one fetch carries (FetchSessionHandler.FetchRequestData)."""

    session_id: int
    session_epoch: int
    to_send: list[FetchPartition]
    forgotten: list[ForgottenPartition]
    # Every partition this fetch stands for, sent or kept by the leader: what the response's
    # partitions are matched against.
    wanted: dict[TopicPartition, FetchPartition] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        return self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH if enabled else FINAL_EPOCH
        # The partitions the leader's session holds, as last confirmed.
        self.session: dict[TopicPartition, FetchPartition] = {}

    @property
    def next_is_full(self) -> bool:
        """Whether the next fetch lists every partition (sessionless or a new session)."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build(self, wanted: Iterable[FetchPartition]) -> SessionRequest:
        """The next fetch for `wanted` (in the order a full fetch lists them)."""
        by_tp = {TopicPartition(fp.topic, fp.partition): fp for fp in wanted}
        if self.epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            return SessionRequest(
                session_id=self.session_id,
                session_epoch=self.epoch,
                to_send=list(by_tp.values()),
                forgotten=[],
                wanted=by_tp,
            )
        session = self.session
        to_send = []
        for tp, fp in by_tp.items():
            held = session.get(tp)
            if held is not fp and held != fp:  # identity first: unchanged entries are reused
                to_send.append(fp)
        forgotten = [
            ForgottenPartition(topic=tp.topic, partition=tp.partition)
            for tp in self.session
            if tp not in by_tp
        ]
        return SessionRequest(
            session_id=self.session_id,
            session_epoch=self.epoch,
            to_send=to_send,
            forgotten=forgotten,
            wanted=by_tp,
        )

    def handle_response(self, sent: SessionRequest, error_code: int, session_id: int) -> bool:
        """The response to `sent` arrived with this top-level error and session id; True if its
        partitions are to be processed (no session error)."""
        if not self.enabled:
            return True
        if error_code != ErrorCode.NONE:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self._restart()
            return False
        if sent.session_epoch == INITIAL_EPOCH:
            self.session_id = session_id
            if session_id == INVALID_SESSION_ID:  # no slot: full again next time
                self._restart()
                return True
            self.epoch = next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        self.session = dict(sent.wanted)
        return True

    def on_error(self) -> None:
        """The fetch failed without a response (a broken connection): the next fetch is full
        and closes the session the leader may still hold (FetchSessionHandler.handleError)."""
        if self.enabled:
            self._restart()

    def _restart(self) -> None:
        self.epoch = INITIAL_EPOCH
        self.session = {}
