"""`ChannelSettlement`: a channel's acks, nacks, rejects, recover and transactions.

Part of :class:`~api.amqp.channel_session.ChannelSession` (a mixin: it works on
the session's delivery tags, transaction and pending acks). Outside a
transaction, acks of one socket read are settled together (`PendingAcks`) and
nacks, rejects and recover at once; inside one, every settlement waits for
tx.commit, which settles them, starts the buffered publishes and answers
commit-ok once both are durable (`channel_tx.py`); tx.rollback gives the
deliveries their tags back.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections import deque
from functools import partial

from pamqp import base, commands

from api.amqp.channel_tx import Settlement, Transaction, apply_settlement, settles_durable
from api.amqp.connection_context import ConnectionContext
from api.amqp.delivery_tags import DeliveryTags, UnknownDeliveryTag
from api.amqp.events import Acks, ChannelMethod, Publish
from api.amqp.pending_acks import PendingAcks
from api.amqp.publish_pipeline import PublishPipeline
from logbroker.errors import NOT_IMPLEMENTED, PRECONDITION_FAILED, BrokerError
from logbroker.queue.queue_type import QueueType

__all__ = ["ChannelSettlement"]

ChannelEvent = ChannelMethod | Acks | Publish


class ChannelSettlement(ABC):
    """The settlement and tx methods of a channel session; the session provides the
    state below and the abstract methods."""

    closed: bool
    _ctx: ConnectionContext
    _tags: DeliveryTags[QueueType]
    _tx: Transaction[QueueType] | None
    _acks: PendingAcks
    _pipeline: PublishPipeline
    _global_prefetch: int
    _backlog: deque[ChannelEvent] | None

    @abstractmethod
    def fail(self, err: BrokerError, method: base.Frame) -> None:
        """Close the channel (or the connection) for `err`, raised by `method`."""

    @abstractmethod
    def resume(self) -> None:
        """Credit may have grown: pump the channel's queues."""

    @abstractmethod
    def _send(self, method: base.Frame) -> None:
        """Send `method` on the channel."""

    @abstractmethod
    def _release_backlog(self) -> None:
        """Handle the events that waited for the channel's earlier publishes."""

    # -- tx.* ------------------------------------------------------------------------

    def _tx_select(self, _method: commands.Tx.Select) -> None:
        if self._pipeline.confirming:
            raise BrokerError(PRECONDITION_FAILED, "cannot switch from confirm to tx mode")
        if self._tx is None:
            self._tx = Transaction()
        self._send(commands.Tx.SelectOk())

    def _tx_commit(self, method: commands.Tx.Commit) -> None:
        publishes, settlements = self._transaction().take()
        touched = [endpoint for settlement in settlements for endpoint in self._settle(settlement)]
        settled = asyncio.ensure_future(settles_durable(touched))
        # Retrieved even if the channel closes first and the barrier never runs.
        settled.add_done_callback(_retrieve_outcome)
        for message, mandatory in publishes:
            self._pipeline.submit(message, mandatory)
        self._backlog = deque()  # later requests wait for commit-ok
        self._pipeline.barrier(lambda all_confirmed: settled.add_done_callback(
            partial(self._committed, method, all_confirmed)))

    def _committed(self, method: commands.Tx.Commit, all_confirmed: bool,
                   settled: asyncio.Future[None]) -> None:
        if self.closed:
            return  # nobody left to tell
        if not all_confirmed or settled.cancelled() or settled.exception() is not None:
            self.fail(BrokerError(PRECONDITION_FAILED, "partial tx completion"), method)
            return
        self._send(commands.Tx.CommitOk())
        self._release_backlog()

    def _tx_rollback(self, _method: commands.Tx.Rollback) -> None:
        _publishes, settlements = self._transaction().take()
        for settlement in settlements:
            self._tags.restore(settlement.deliveries)
        self._send(commands.Tx.RollbackOk())

    def _transaction(self) -> Transaction[QueueType]:
        if self._tx is None:
            raise BrokerError(PRECONDITION_FAILED, "channel is not transactional")
        return self._tx

    # -- settlement ------------------------------------------------------------------

    def _ack(self, method: commands.Basic.Ack) -> None:
        self._ack_run([(method.delivery_tag, method.multiple)])

    def _ack_run(self, acks: list[tuple[int, bool]]) -> None:
        """basic.acks in a row, in order; an unknown tag closes the channel there, as
        its own ack would have."""
        tags, tx, gathered = self._tags, self._tx, self._acks
        for delivery_tag, multiple in acks:
            try:
                taken = tags.take(delivery_tag, multiple)
            except UnknownDeliveryTag as err:
                self.fail(BrokerError(PRECONDITION_FAILED, str(err)),
                          commands.Basic.Ack(delivery_tag, multiple))
                return
            if tx is not None:
                tx.settlements.append(Settlement(taken, ack=True))
            else:
                gathered.add(taken)  # settled with the read's other acks (pending_acks.py)

    def _nack(self, method: commands.Basic.Nack) -> None:
        taken = self._tags.take(method.delivery_tag, method.multiple)
        self._settle_or_hold(Settlement(taken, ack=False, requeue=method.requeue))

    def _reject(self, method: commands.Basic.Reject) -> None:
        taken = self._tags.take(method.delivery_tag or 0, multiple=False)
        self._settle_or_hold(Settlement(taken, ack=False, requeue=method.requeue))

    def _recover(self, method: commands.Basic.Recover | commands.Basic.RecoverAsync) -> None:
        if not method.requeue:
            raise BrokerError(NOT_IMPLEMENTED, "requeue=false")
        self._settle(Settlement(self._tags.take_all(), ack=False, requeue=True))
        if isinstance(method, commands.Basic.Recover):
            self._send(commands.Basic.RecoverOk())

    def _settle_or_hold(self, settlement: Settlement[QueueType]) -> None:
        if self._tx is not None:
            self._tx.settlements.append(settlement)
        else:
            self._settle(settlement)

    def _settle(self, settlement: Settlement[QueueType]) -> list[QueueType]:
        settled = apply_settlement(self._ctx.broker, self._ctx.session.vhost, settlement)
        if self._global_prefetch:
            self.resume()  # channel credit grew for every queue we consume from
        return settled


def _retrieve_outcome(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()
