"""`ChannelSettlement`: settling a channel's unacked deliveries (ack, nack, reject, recover).

Theory of operation
-------------------
A channel session holds one :class:`ChannelSettlement` over the channel's
:class:`~api.amqp.delivery_tags.DeliveryTags`. Each method takes its tags at
once (an unknown tag fails at its own method, with 406 PRECONDITION_FAILED)
and then

* outside a transaction: plain acks of one socket read are gathered and
  settled together (:class:`~api.amqp.pending_acks.PendingAcks`); nacks,
  rejects and recover settle at once;
* inside one (:class:`~api.amqp.channel_tx.ChannelTransaction`): every
  settlement waits for tx.commit, and tx.rollback gives the tags back.

Invariant: a delivery tag is settled at most once; whatever is gathered is
settled before the channel handles any other method and before it closes
(`flush`), so what follows an ack sees it settled and nothing acked is
requeued by the close.
"""

from __future__ import annotations

from collections.abc import Callable

from pamqp import base, commands

from api.amqp.channel_tx import ChannelTransaction, Settle, Settlement
from api.amqp.delivery_tags import DeliveryTags, UnknownDeliveryTag
from api.amqp.pending_acks import PendingAcks
from logbroker.errors import NOT_IMPLEMENTED, PRECONDITION_FAILED, BrokerError
from logbroker.queue.queue_type import QueueType

__all__ = ["ChannelSettlement"]

Fail = Callable[[BrokerError, base.Frame], None]


class ChannelSettlement:
    """The ack, nack, reject and recover methods of one channel."""

    def __init__(self, tags: DeliveryTags[QueueType], tx: ChannelTransaction,
                 settle: Settle, after_read: Callable[[Callable[[], None]], None],
                 send: Callable[[base.Frame], None], fail: Fail) -> None:
        """`settle` carries a settlement out on the queues; `fail` closes the channel."""
        self._tags = tags
        self._tx = tx
        self._settle = settle
        self._send = send
        self._fail = fail
        self._acks = PendingAcks(settle, after_read)

    def flush(self) -> None:
        """Settle the gathered acks now (before another method, or the close)."""
        self._acks.flush()

    def ack(self, method: commands.Basic.Ack) -> None:
        self.ack_run([(method.delivery_tag, method.multiple)])

    def ack_run(self, acks: list[tuple[int, bool]]) -> None:
        """basic.acks in a row, in order; an unknown tag closes the channel there, as
        its own ack would have."""
        for delivery_tag, multiple in acks:
            try:
                taken = self._tags.take(delivery_tag, multiple)
            except UnknownDeliveryTag as err:
                self._fail(BrokerError(PRECONDITION_FAILED, str(err)),
                           commands.Basic.Ack(delivery_tag, multiple))
                return
            if self._tx.open:
                self._tx.hold_settlement(Settlement(taken, ack=True))
            else:
                self._acks.add(taken)  # settled with the read's other acks (pending_acks.py)

    def nack(self, method: commands.Basic.Nack) -> None:
        taken = self._tags.take(method.delivery_tag, method.multiple)
        self._settle_or_hold(Settlement(taken, ack=False, requeue=method.requeue))

    def reject(self, method: commands.Basic.Reject) -> None:
        taken = self._tags.take(method.delivery_tag or 0, multiple=False)
        self._settle_or_hold(Settlement(taken, ack=False, requeue=method.requeue))

    def recover(self, method: commands.Basic.Recover | commands.Basic.RecoverAsync) -> None:
        if not method.requeue:
            raise BrokerError(NOT_IMPLEMENTED, "requeue=false")
        self._settle(Settlement(self._tags.take_all(), ack=False, requeue=True))
        if isinstance(method, commands.Basic.Recover):
            self._send(commands.Basic.RecoverOk())

    def _settle_or_hold(self, settlement: Settlement[QueueType]) -> None:
        if self._tx.open:
            self._tx.hold_settlement(settlement)
        else:
            self._settle(settlement)
