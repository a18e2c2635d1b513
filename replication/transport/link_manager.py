"""The links of every peer: which one is current, and how one replaces another.

Theory of operation. A connection becomes a *link* of its peer once its
handshake is done (`adopt`). Each peer has one send queue, at most one
*current* link, which the writer drains the queue into, and any number of
*retiring* links. A peer is connected while it has a current link. The queue
belongs to the peer, so replacing the current link loses nothing queued.

One link per pair. Two links to one peer appear when both nodes dial at once,
when the peer redials before we have seen its old connection die, or when the
peer restarted. When a link is adopted while the peer already has a current one:
- a different incarnation means the peer restarted: the old links are dead
  and are aborted (the peer is reported down, then up; the queue is dropped);
- otherwise `keeps_new_link` picks the survivor: the link dialed by the node
  whose name sorts lower; of two dialed by the same node, the newer. Both ends
  apply the same rule to the same two connections, so they agree unprompted.
The loser is *retired*, not cut: its writer stops taking frames, flushes and
half-closes (FIN); its reader keeps delivering what is in flight until the
peer's FIN. Both ends do the same, so a retired link ends cleanly on both.

Order across a switch. Frames a node wrote on the old link must be delivered
before those it writes on the new one, though they travel on two TCP streams.
Two rules give that: (1) a link neither writes nor delivers until every link
in its `after` list (the live links it replaced, and losers retired while it
was current) has been read up to the peer's FIN; (2) a node half-closes a link
only once it has retired it. So when our new link starts writing, the peer has
already retired the old one and holds back the new one's frames until the old
one's end; we hold the peer's frames back the same way. A retired link that
has not ended within `handshake_timeout_s` is aborted, which bounds every wait.

An EOF on the current link may be the peer retiring it in favour of a link
whose handshake has not finished on our side yet. The peer can only have
finished that handshake after reading our proof, which we send only after
counting the connection as pending for that peer; so on EOF we wait for the
peer's pending handshakes to settle before declaring the peer down.

Heartbeats. A paused (SIGSTOP) or cut-off peer leaves its TCP connection
open, and the layers above act only on a link going down (failing calls,
moving consumers, the controller's quick liveness rule). So a writer with
nothing queued sends a ping, an empty frame that is never delivered, every
`ping_interval_s`, and a link on which nothing has been read for
`idle_timeout_s` is closed as broken. The check is deferred by one loop turn
before it closes: after a stall of this process, bytes that arrived meanwhile
are read first, so only the peer's silence counts, not ours. But a read that
waited longer than `idle_timeout_s` closes the link without delivering what it
read: this process stalled, so the peer, hearing no ping, has closed the link
on its side and acted on it (requeued what it had forwarded here).

Invariants: connected iff a current link exists; the current link is never
retiring; a frame `send` accepted is written at most once, on one link, in
order; frames still queued when a peer goes down are dropped (the layers above
resend from their own state); `on_peer_change` alternates up/down per peer.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from typing import Any

from replication.transport.backoff import Backoff
from replication.transport.config import TransportLimits
from replication.transport.frames import HEADER, FrameError, FrameTooLargeError
from replication.transport.peer_link import PeerLink, PeerState, keeps_new_link

logger = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024
PING = HEADER.pack(0)  # an empty frame: a heartbeat, never delivered
WRITE_BATCH_BYTES = 1 << 20  # frames joined into one write, then one drain

Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class LinkManager:
    def __init__(
        self,
        own_name: str,
        limits: TransportLimits,
        rng: random.Random,
        spawn: Spawn,
        release: Callable[[asyncio.StreamWriter, bool], None],
        on_frame: Callable[[str, bytes], None],
        on_peer_change: Callable[[str, bool], None] | None,
    ) -> None:
        self._own_name = own_name
        self._limits = limits
        self._rng = rng
        self._spawn = spawn
        self._release = release  # closes a socket (aborts it if asked) and stops counting it
        self._on_frame = on_frame
        self._on_peer_change = on_peer_change
        self.peers: dict[str, PeerState] = {}
        self.listed: set[str] = set()  # peers from set_peers: their state outlives their links
        self.frames_sent = 0
        self.frames_received = 0
        self.frames_refused = 0
        self.frames_dropped = 0
        self.links_replaced = 0

    def state(self, name: str) -> PeerState:
        state = self.peers.get(name)
        if state is None:
            backoff = Backoff(self._limits.reconnect_min_s, self._limits.reconnect_max_s, self._rng)
            state = self.peers[name] = PeerState(name, backoff)
        return state

    def forget_if_idle(self, state: PeerState) -> None:
        if state.idle() and state.name not in self.listed and self.peers.get(state.name) is state:
            del self.peers[state.name]

    def send(self, peer: str, payload: bytes) -> bool:
        if len(payload) > self._limits.max_frame_bytes:
            raise FrameTooLargeError(len(payload), self._limits.max_frame_bytes)
        state = self.peers.get(peer)
        limits = self._limits
        if (
            state is None
            or state.current is None
            or not state.enqueue(payload, limits.send_queue_frames, limits.send_queue_bytes)
        ):
            self.frames_refused += 1
            return False
        state.current.wake.set()
        return True

    def adopt(self, state: PeerState, link: PeerLink) -> None:
        """Makes an authenticated connection a link of its peer: current, or retired at once."""
        state.links.add(link)
        for old in list(state.links):
            if old.incarnation != link.incarnation:
                self.close(old, "peer restarted", abort=True)
        current = state.current
        if current is None:
            self._make_current(state, link)
            logger.info("cluster link to %s up", link.describe())
            self._notify(state.name, True)
        elif current.finished.is_set() or keeps_new_link(
            self._own_name, state.name, current.dialed_by, link.dialed_by
        ):  # a current link the peer has already closed is never worth keeping
            self._make_current(state, link)
            self._retire(current)
        else:
            self._retire(link)
            current.after.append(link)

    def close(self, link: PeerLink, reason: str, *, abort: bool = False) -> None:
        """Closes a link for good (idempotent); reports the peer down if it was current."""
        if link.closed:
            return
        link.closed = True
        link.finished.set()
        if link.deadline is not None:
            link.deadline.cancel()
        if link.watchdog is not None:
            link.watchdog.cancel()
        task = link.writer_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self._release(link.writer, abort)
        state = self.peers[link.peer]
        state.links.discard(link)
        if state.current is link:
            state.current = None
            self.frames_dropped += state.clear_queue()
            state.disconnected.set()
            logger.info("cluster link to %s down: %s", link.describe(), reason)
            self._notify(state.name, False)
        self.forget_if_idle(state)

    async def run(self, link: PeerLink) -> None:
        """Reads a link until it ends, then closes it; runs its writer alongside."""
        state = self.peers[link.peer]
        writer_task = link.writer_task = self._spawn(self._write_loop(state, link))
        link.heard = asyncio.get_running_loop().time()
        self._arm_watchdog(link)
        try:
            await self._read_loop(link)
        except (FrameError, OSError) as exc:
            reason = str(exc) or type(exc).__name__
            if isinstance(exc, FrameTooLargeError):
                logger.warning("closing cluster link to %s: %s", link.describe(), reason)
            self.close(link, reason, abort=True)
            return
        except BaseException:  # cancelled (stop) or a bug: never leave a half-dead link behind
            self.close(link, "reader stopped", abort=True)
            raise
        finally:
            link.finished.set()
        if link is state.current:
            await self._settle(state)  # the peer may have retired it for a link still handshaking
        if link is state.current or link.closed:
            self.close(link, "closed by peer")
            return
        await asyncio.wait([writer_task])  # our half-close; bounded by the link's deadline
        self.close(link, "replaced")

    def close_all(self, reason: str) -> None:
        for state in list(self.peers.values()):
            for link in list(state.links):
                self.close(link, reason)

    def _make_current(self, state: PeerState, link: PeerLink) -> None:
        link.after = [old for old in state.links if old is not link and not old.finished.is_set()]
        state.current = link
        state.disconnected.clear()
        state.backoff.reset()
        link.wake.set()

    def _retire(self, link: PeerLink) -> None:
        self.links_replaced += 1
        link.retiring = True
        link.wake.set()
        link.deadline = asyncio.get_running_loop().call_later(
            self._limits.handshake_timeout_s, self._retire_overdue, link
        )

    def _arm_watchdog(self, link: PeerLink) -> None:
        if not link.closed:
            link.watchdog = asyncio.get_running_loop().call_later(
                self._limits.ping_interval_s, self._watch, link)

    def _watch(self, link: PeerLink) -> None:
        if link.closed:
            return
        loop = asyncio.get_running_loop()
        if link.after or link.retiring:
            link.heard = loop.time()  # not reading yet, or ending: bounded by its deadline
        elif loop.time() - link.heard > self._limits.idle_timeout_s:
            # Once more a turn later: what arrived while this process stalled is read first.
            loop.call_soon(self._confirm_silent, link)
            return
        self._arm_watchdog(link)

    def _confirm_silent(self, link: PeerLink) -> None:
        if link.closed:
            return
        silent = asyncio.get_running_loop().time() - link.heard
        if silent > self._limits.idle_timeout_s:
            logger.warning("cluster link to %s silent for %.1f s; closing it as broken",
                           link.describe(), silent)
            self.close(link, f"peer silent for {silent:.1f} s", abort=True)
        else:
            self._arm_watchdog(link)

    def _retire_overdue(self, link: PeerLink) -> None:
        logger.info("replaced cluster link to %s did not end in time; aborting it", link.describe())
        self.close(link, "replaced link did not end in time", abort=True)

    async def _settle(self, state: PeerState) -> None:
        try:
            async with asyncio.timeout(self._limits.handshake_timeout_s):
                await state.settled.wait()
        except TimeoutError:
            pass

    async def _wait_after(self, link: PeerLink) -> None:
        """Until every link in `link.after` has been read to its end."""
        while True:
            link.after[:] = [old for old in link.after if not old.finished.is_set()]
            if not link.after:
                return
            await link.after[0].finished.wait()

    async def _read_loop(self, link: PeerLink) -> None:
        """Delivers frames in order until the peer's FIN."""
        while True:
            while (frame := link.decoder.next_frame()) is not None:
                if not frame:
                    continue  # a ping: it only says the peer is alive
                if link.after:
                    await self._wait_after(link)
                self.frames_received += 1
                try:
                    self._on_frame(link.peer, frame)
                except Exception:
                    logger.exception("on_frame failed for a frame from %s", link.peer)
            loop = asyncio.get_running_loop()
            waited_since = loop.time()
            data = await link.reader.read(READ_CHUNK)
            if not data:
                return
            link.heard = loop.time()
            if link.heard - waited_since > self._limits.idle_timeout_s:
                # Nothing arrived for longer than a peer may stay silent, though it pings:
                # it stalled (the watchdog closes such a link), or this process did, and
                # then the peer has closed the link on its side already. What was buffered
                # belongs to that link: delivering it now (a forwarded delivery the peer
                # has since requeued and redelivered) would come after the peer moved on.
                raise ConnectionError(f"nothing read for {link.heard - waited_since:.1f} s: "
                                      "this node or the peer stalled")
            link.decoder.feed(data)

    async def _write_loop(self, state: PeerState, link: PeerLink) -> None:
        """Drains the peer's queue into the link while it is current, then half-closes it."""
        writer = link.writer
        try:
            while state.current is link:
                if link.after:
                    await self._wait_after(link)
                elif not state.queue:
                    link.wake.clear()
                    try:
                        async with asyncio.timeout(self._limits.ping_interval_s):
                            await link.wake.wait()
                    except TimeoutError:
                        if state.current is link and not state.queue:
                            writer.write(PING)  # nothing to say for a while: still here
                            await writer.drain()
                else:
                    count, data = state.take_batch(WRITE_BATCH_BYTES)
                    writer.write(data)
                    self.frames_sent += count
                    await writer.drain()
            if not link.closed and writer.can_write_eof():
                writer.write_eof()
        except OSError as exc:  # ConnectionError included
            self.close(link, f"write failed: {exc}", abort=True)
        except Exception:
            self.close(link, "writer failed", abort=True)
            raise

    def _notify(self, peer: str, connected: bool) -> None:
        if self._on_peer_change is None:
            return
        try:
            self._on_peer_change(peer, connected)
        except Exception:
            logger.exception("on_peer_change failed for %s", peer)
