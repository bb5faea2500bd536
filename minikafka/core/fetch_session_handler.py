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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from minikafka.common import TopicPartition
from minikafka.core.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)
from minikafka.errors import ErrorCode
from minikafka.wire.messages import FetchPartition, ForgottenPartition

SESSION_ERRORS = frozenset(
    {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRequest:
    """What one fetch carries (FetchSessionHandler.FetchRequestData), and the partitions it
    stands for: a full fetch's `added` is all of them; an incremental one's are the session as
    last confirmed (`base`) with `added` put in and `forgotten` taken out."""

    session_id: int
    session_epoch: int
    added: dict[TopicPartition, FetchPartition]  # sent, in order
    removed: frozenset[TopicPartition] = frozenset()
    base: Mapping[TopicPartition, FetchPartition] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        return self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    @property
    def to_send(self) -> list[FetchPartition]:
        return list(self.added.values())

    @property
    def forgotten(self) -> list[ForgottenPartition]:
        return [ForgottenPartition(topic=tp.topic, partition=tp.partition) for tp in self.removed]

    def get(self, tp: TopicPartition) -> FetchPartition | None:
        """The fetch state this fetch stands for `tp` with (None: not fetched)."""
        fp = self.added.get(tp)
        if fp is not None or self.full or tp in self.removed:
            return fp
        return self.base.get(tp)

    def size(self) -> int:
        """How many partitions this fetch stands for."""
        if self.full:
            return len(self.added)
        new = sum(1 for tp in self.added if tp not in self.base)
        return len(self.base) + new - len(self.removed)

    def wanted(self) -> dict[TopicPartition, FetchPartition]:
        """Every partition this fetch stands for (a copy: O(partitions), for tests and logs)."""
        if self.full:
            return dict(self.added)
        out = {tp: fp for tp, fp in self.base.items() if tp not in self.removed}
        out.update(self.added)
        return out


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
        """The next fetch for `wanted` (in the order a full fetch lists them), comparing every
        partition with the session; `build_changes` compares only those that may have moved."""
        by_tp = {TopicPartition(fp.topic, fp.partition): fp for fp in wanted}
        if self.next_is_full:
            return SessionRequest(session_id=self.session_id, session_epoch=self.epoch, added=by_tp)
        gone = [tp for tp in self.session if tp not in by_tp]
        return self.build_changes([*by_tp, *gone], by_tp.get)

    def build_changes(
        self,
        changed: Iterable[TopicPartition],
        wanted: Callable[[TopicPartition], FetchPartition | None],
    ) -> SessionRequest:
        """An incremental fetch when only the partitions `changed` may differ from the session
        (the others are wanted as the session holds them): each is sent if wanted with another
        fetch state, forgotten if no longer wanted (`wanted` returns None). So an idle fetcher's
        request costs nothing per partition."""
        assert not self.next_is_full, "a full fetch lists every partition: use build"
        session = self.session
        added: dict[TopicPartition, FetchPartition] = {}
        removed = set()
        for tp in changed:
            fp = wanted(tp)
            held = session.get(tp)
            if fp is None:
                if held is not None:
                    removed.add(tp)
            elif held is not fp and held != fp:  # identity first: unchanged entries are reused
                added[tp] = fp
        return SessionRequest(
            session_id=self.session_id,
            session_epoch=self.epoch,
            added=added,
            removed=frozenset(removed),
            base=session,
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
            self.session = dict(sent.added)
        else:
            self.epoch = next_epoch(self.epoch)
            for tp in sent.removed:
                self.session.pop(tp, None)
            self.session.update(sent.added)
        return True

    def on_error(self) -> None:
        """The fetch failed without a response (a broken connection): the next fetch is full
        and closes the session the leader may still hold (FetchSessionHandler.handleError)."""
        if self.enabled:
            self._restart()

    def _restart(self) -> None:
        self.epoch = INITIAL_EPOCH
        self.session = {}
