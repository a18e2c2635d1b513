"""Publishing: route a message, admit it to every target queue, append, confirm.

A publish is confirmed (`PublishResult.confirmed`) once every queue it was
routed to holds it durably under that queue's fsync policy; it is nacked when
a queue refused it (`x-overflow` reject-publish). An unroutable message is
confirmed at once and, if `mandatory`, reported for a basic.return (312
NO_ROUTE), as RabbitMQ does. Dead-lettered messages take the same path from
the queue's dead-letter exchange, minus the queues that would close a cycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple

from logbroker.dead_letter import dead_lettered, drop_cycles
from logbroker.message import Message
from logbroker.message_stats import MessageStats
from logbroker.queue.effects import DeadLetterReason
from logbroker.queue.queue_limits import Admission
from logbroker.queue.queue_shell import QueueShell
from logbroker.queue.queue_type import RemoteQueues
from logbroker.routing import ExchangeRouter, RoutedMessage
from segments.clock import SYSTEM_CLOCK, Clock


class PublishResult(NamedTuple):  # immutable, so the usual outcomes are shared
    routed: bool
    confirmed: bool  # False: nack (a queue refused it)
    reason: str = ""  # why not confirmed, when a queue said so


_CONFIRMED = {True: PublishResult(True, True), False: PublishResult(False, True)}


QueueLookup = Callable[[str, str], QueueShell | None]
RouterLookup = Callable[[str], ExchangeRouter]
RemoteLookup = Callable[[], RemoteQueues | None]


class Publisher:
    """Routes and appends. In a cluster, queues led by other nodes get their share
    through `RemoteQueues.publish`, one request per node and batch, in call order."""

    def __init__(self, routers: RouterLookup, queues: QueueLookup,
                 remote: RemoteLookup = lambda: None, clock: Clock = SYSTEM_CLOCK) -> None:
        self._routers = routers
        self._queues = queues
        self._remote = remote
        self._clock = clock  # wall time: messages' timestamps, x-death's `time`
        self.stats = MessageStats()  # the front ends count their confirms and returns here

    def route_all(self, vhost: str, exchange: str, message: Message
                  ) -> tuple[list[QueueShell], list[str]]:
        """(shells of local target queues, names of target queues led by other nodes)."""
        shells, remote, _ = self._route(vhost, exchange, message)
        return shells, remote

    def _route(self, vhost: str, exchange: str, message: Message
               ) -> tuple[list[QueueShell], list[str], bool]:
        """`route_all`, and whether the route holds for any message with that exchange
        and routing key (`RoutingResult.by_key_only`)."""
        routed = self._routers(vhost).route(
            exchange,
            RoutedMessage(message.routing_key, message.properties.headers,
                          _routing_properties(message)),
        )
        shells: list[QueueShell] = []
        remote: list[str] = []
        for name in routed.queues:
            shell = self._queues(vhost, name)
            if shell is not None:
                shells.append(shell)
            elif self._remote() is not None:
                remote.append(name)
        return shells, remote, routed.by_key_only

    async def publish(self, vhost: str, message: Message) -> PublishResult:
        return (await self.publish_batch(vhost, [message]))[0]

    async def publish_batch(self, vhost: str, messages: Sequence[Message],
                            holds: list[asyncio.Future[None]] | None = None,
                            publisher_id: str = "") -> list[PublishResult]:
        return await self.start_batch(vhost, messages, holds, publisher_id)

    def start_batch(self, vhost: str, messages: Sequence[Message],
                    holds: list[asyncio.Future[None]] | None = None, publisher_id: str = "",
                    ) -> asyncio.Future[list[PublishResult]]:
        """Publish `messages` in order, with one log write per target queue.

        Routing and appending happen during this call, so the order of calls is
        the order of every queue's log, and no task or loop iteration stands
        between a publish and the write that makes it deliverable. The future
        resolves once all of it is durable. A batch (an AMQP channel's publishes
        of one socket read, a REST or WebSocket frame) costs one append per
        queue, not a task and a future per message.

        `holds` receives a future for each target queue that holds its
        publishers back (`publisher_flow`; for a queue led by another node, once
        that node said so, see `cluster/remote_flow.py`): the caller reads no more
        from this publisher until they are done. `publisher_id` is the publishing
        connection's id: a queue it consumes from never holds it.
        """
        self.stats.publish += len(messages)
        try:
            now_ms = self._clock.wall_ms()
            routed = []
            forwarded: list[tuple[int, Message, list[str]]] = []
            # A batch's messages mostly share exchange and key; nothing can change the
            # bindings or the queues during this call, so a route by key alone is reused.
            routes: dict[tuple[str, str], tuple[list[QueueShell], list[str]]] = {}
            for index, message in enumerate(messages):
                message.timestamp_ms = message.timestamp_ms or now_ms
                route = routes.get((message.exchange, message.routing_key))
                if route is None:
                    shells, remote, by_key_only = self._route(vhost, message.exchange, message)
                    if by_key_only:
                        routes[(message.exchange, message.routing_key)] = (shells, remote)
                else:
                    shells, remote = route
                routed.append((message, shells))
                self.stats.routed(vhost, message.exchange, bool(shells or remote))
                if remote:
                    forwarded.append((index, message, remote))
            if not forwarded:
                return self._deliver_now(routed, holds, publisher_id)
            remote_queues = self._remote()
            assert remote_queues is not None
            # Sent before the local appends, as one call: a publisher's messages keep
            # their order on every node.
            sent = remote_queues.publish(
                vhost, [(message, names) for _, message, names in forwarded])
            local = self._deliver_now(routed, holds, publisher_id)
            if holds is not None:
                names = {name for _, _, names in forwarded for name in names}
                holds.extend(remote_queues.holds(vhost, names, publisher_id))
        except Exception as error:  # a queue closed under us, a disk error: nack them
            failed: asyncio.Future[list[PublishResult]] = (
                asyncio.get_running_loop().create_future())
            failed.set_exception(error)
            return failed
        return asyncio.ensure_future(_with_remote(local, sent, forwarded))

    def start_routed(self, routed: Sequence[tuple[Message, list[QueueShell]]]
                     ) -> asyncio.Future[list[PublishResult]]:
        """Publish messages already routed to local queues (forwarded by another node):
        appended during the call, as `start_batch` does; resolves once durable."""
        return self._deliver_now(routed)

    def _deliver_now(self, routed: Sequence[tuple[Message, list[QueueShell]]],
                     holds: list[asyncio.Future[None]] | None = None, publisher_id: str = "",
                     ) -> asyncio.Future[list[PublishResult]]:
        """Admit each message to its target queues and append every queue's share now
        (so call order is log order); the future resolves once all of it is durable."""
        # Each queue's share, in order: (shell, message indexes). A queue decides on
        # its share in one call; queues do not affect each other's admissions.
        shares: dict[int, tuple[QueueShell, list[int]]] = {}
        for index, (_, targets) in enumerate(routed):
            for shell in targets:
                entry = shares.get(id(shell))
                if entry is None:
                    entry = shares[id(shell)] = (shell, [])
                entry[1].append(index)
        per_queue: list[tuple[QueueShell, list[Message]]] = []
        refused: dict[int, str] = {}  # message index -> why
        dead_letters: list[tuple[int, int, QueueShell]] = []  # (index, queue's turn, queue)
        for turn, (shell, indexes) in enumerate(shares.values()):
            share = [routed[index][0] for index in indexes]
            admissions = shell.admit_many(share)
            if admissions is None:
                per_queue.append((shell, share))
                continue
            accepted = []
            for index, message, admission in zip(indexes, share, admissions, strict=True):
                if admission is Admission.ACCEPT:
                    accepted.append(message)
                    continue
                refused.setdefault(index, shell.refusal)
                if admission is Admission.REJECT_DEAD_LETTER:
                    dead_letters.append((index, turn, shell))
            if accepted:
                per_queue.append((shell, accepted))
        # Dead-lettered in message order, as they were refused one by one before.
        pending: list[Awaitable[object]] = [
            self.dead_letter(shell, routed[index][0], DeadLetterReason.MAXLEN)
            for index, _, shell in sorted(dead_letters, key=lambda entry: entry[:2])]
        pending.extend(shell.append_many(batch) for shell, batch in per_queue)
        if holds is not None:
            for shell, _ in per_queue:
                if (hold := shell.hold_publisher(publisher_id)) is not None:
                    holds.append(hold)
        results = [_CONFIRMED[bool(targets)] for _, targets in routed]
        for index, reason in refused.items():
            results[index] = PublishResult(bool(routed[index][1]), False, reason)
        done: asyncio.Future[list[PublishResult]] = asyncio.get_running_loop().create_future()
        if not pending:
            done.set_result(results)
            return done
        # The common case, one queue, without the task and future that gather costs.
        waited: asyncio.Future[Any] = (
            asyncio.ensure_future(pending[0]) if len(pending) == 1 else asyncio.gather(*pending))

        def finished(outcome: asyncio.Future[Any]) -> None:
            if done.done():
                return
            if outcome.cancelled():
                done.cancel()
            elif (error := outcome.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(results)

        waited.add_done_callback(finished)
        return done

    async def dead_letter(
        self, source: QueueShell, message: Message, reason: DeadLetterReason
    ) -> None:
        """Republish `message` from `source` to its dead-letter exchange, if it has one."""
        exchange = source.settings.dead_letter_exchange
        if exchange is None:
            return
        vhost = source.settings.vhost
        if not self._routers(vhost).has_exchange(exchange):
            return  # RabbitMQ drops the message when the DLX does not exist
        republished, routing_key = dead_lettered(
            message, source.name, reason, source.settings.dead_letter_routing_key,
            self._clock.wall_ms(),
        )
        republished.exchange = exchange
        republished.routing_key = routing_key
        targets, remote_names = self.route_all(vhost, exchange, republished)
        allowed = set(drop_cycles(republished, [shell.name for shell in targets] + remote_names))
        remote = self._remote()
        if remote is not None and any(name in allowed for name in remote_names):
            await remote.publish(vhost, [(republished, [n for n in remote_names if n in allowed])])
        await self._deliver_now([(republished, [t for t in targets if t.name in allowed])])


async def _with_remote(local: Awaitable[list[PublishResult]], sent: Awaitable[list[bool]],
                       forwarded: Sequence[tuple[int, Message, list[str]]]
                       ) -> list[PublishResult]:
    """The local results, with each forwarded message confirmed only if its remote
    queues confirmed it too."""
    results = list(await local)
    confirmed = await sent
    for (index, _, _), ok in zip(forwarded, confirmed, strict=True):
        reason = results[index].reason or ("" if ok else "refused by a queue on another node")
        results[index] = PublishResult(routed=True, confirmed=results[index].confirmed and ok,
                                       reason=reason)
    return results


def _routing_properties(message: Message) -> dict[str, object]:
    properties = message.properties
    return {
        "message_id": properties.message_id,
        "correlation_id": properties.correlation_id,
        "timestamp": properties.timestamp,
    }
