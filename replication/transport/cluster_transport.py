"""`ClusterTransport`: authenticated, framed TCP links between cluster nodes.

The asyncio shell around the pure parts (frames.py, handshake.py). It owns
the listener, one dialer task per peer given to `set_peers`, and the
handshake of every connection; once a connection is authenticated it becomes
a link managed by `LinkManager` (link_manager.py explains how a pair of nodes
ends up with exactly one connection and why frames stay in order).

Either end may dial: a node that joins knows the others before they know it.
A peer that authenticates is accepted whether or not it is in `set_peers`;
only listed peers are redialled. Every connection must finish its handshake
within `handshake_timeout_s`; a failed one is closed and logged at WARNING
with the address and the reason. With `tls` (the cluster link over TLS), each
connection first does a mutually verified TLS handshake, in the same time
limit: a node whose certificate does not chain to the CA is refused the same
way. Sends never block: `send` queues one frame
per call, bounded per peer in frames and bytes, and one writer task per link
joins the queued frames into one write and one drain.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import socket
import ssl
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from replication.transport.config import PeerAddress, TransportLimits, TransportStats
from replication.transport.frames import FrameDecoder, FrameError, FrameTooLargeError, encode_frame
from replication.transport.handshake import (
    INCARNATION_BYTES,
    MAX_HELLO_BYTES,
    NONCE_BYTES,
    Handshake,
    HandshakeError,
    MalformedHandshakeError,
    check_node_name,
)
from replication.transport.link_manager import LinkManager
from replication.transport.peer_link import PeerLink, PeerState

logger = logging.getLogger(__name__)

_CLOSE_GRACE_S = 1.0  # how long a closed socket may take to flush before it is aborted
DEFAULT_LIMITS = TransportLimits()
_HANDSHAKE_ERRORS = (HandshakeError, FrameError, OSError)  # TimeoutError is an OSError


class ClusterTransport:
    """Frames to and from the other nodes of the cluster; see the module docstring.

    `send` raises FrameTooLargeError (a ValueError) for a payload over
    `max_frame_bytes`: that is a bug in the caller, not back-pressure, and
    returning False would invite a retry loop. It returns False when the
    peer is not connected or its queue is full. Nonces and incarnations come
    from `secrets`; `rng` only jitters the reconnect delays.
    """

    def __init__(
        self,
        node_name: str,
        secret: bytes,
        *,
        host: str,
        port: int,
        on_frame: Callable[[str, bytes], None],
        on_peer_change: Callable[[str, bool], None] | None = None,
        limits: TransportLimits = DEFAULT_LIMITS,
        rng: random.Random | None = None,
        tls: tuple[ssl.SSLContext, ssl.SSLContext] | None = None,
    ) -> None:
        check_node_name(node_name)
        if not secret:
            raise ValueError("the cluster secret must not be empty")
        self._name = node_name
        self._secret = secret
        self._host = host
        self._requested_port = port
        self._limits = limits
        self._tls = tls  # (accepting, dialing) contexts: mutual TLS before the handshake
        self._incarnation = secrets.token_bytes(INCARNATION_BYTES)
        self._links = LinkManager(
            node_name,
            limits,
            rng or random.Random(),
            self._spawn,
            self._release,
            on_frame,
            on_peer_change,
        )
        self._addresses: dict[str, PeerAddress] = {}
        self._dialers: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closers: set[asyncio.Task[None]] = set()  # graceful closes still flushing
        self._sockets: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._stopping = False
        self._accepted = 0
        self._dialed = 0
        self._handshake_failures = 0

    @property
    def node_name(self) -> str:
        return self._name

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the transport has not been started")
        return self._port

    async def start(self) -> None:
        if self._server is not None or self._stopping:
            raise RuntimeError("a transport starts once")
        self._server = await asyncio.start_server(self._on_accept, self._host, self._requested_port)
        self._port = int(self._server.sockets[0].getsockname()[1])
        for address in self._addresses.values():
            self._start_dialer(address)

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        if self._server is not None:
            self._server.close()
        self._links.close_all("transport stopped")  # graceful: what was written still goes out
        tasks = [task for task in self._tasks if task not in self._closers]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for writer in list(self._sockets):
            self._release(writer, True)
        await asyncio.gather(*list(self._closers), return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def set_peers(self, peers: Iterable[PeerAddress]) -> None:
        """The peers to stay connected to; this node's own name is ignored."""
        wanted = {peer.name: peer for peer in peers if peer.name != self._name}
        for name, address in list(self._addresses.items()):
            if wanted.get(name) == address:
                continue
            del self._addresses[name]
            dialer = self._dialers.pop(name, None)
            if dialer is not None:
                dialer.cancel()
            if name not in wanted:
                self._links.listed.discard(name)
                state = self._links.peers.get(name)
                if state is not None:
                    for link in list(state.links):
                        self._links.close(link, "peer removed from the cluster")
                    self._links.forget_if_idle(state)
        for name, address in wanted.items():
            if name not in self._addresses:
                self._addresses[name] = address
                self._links.listed.add(name)
                self._links.state(name)
                if self._server is not None and not self._stopping:
                    self._start_dialer(address)

    def send(self, peer: str, payload: bytes) -> bool:
        """Queues one frame for `peer`; False (dropped) if not connected or its queue is full."""
        return self._links.send(peer, payload)

    def is_connected(self, peer: str) -> bool:
        state = self._links.peers.get(peer)
        return state is not None and state.current is not None

    def connected_peers(self) -> frozenset[str]:
        return frozenset(name for name, s in self._links.peers.items() if s.current is not None)

    def stats(self) -> TransportStats:
        links = self._links
        return TransportStats(
            open_connections=len(self._sockets),
            connections_accepted=self._accepted,
            connections_dialed=self._dialed,
            handshake_failures=self._handshake_failures,
            links_replaced=links.links_replaced,
            frames_sent=links.frames_sent,
            frames_received=links.frames_received,
            frames_refused=links.frames_refused,
            frames_dropped=links.frames_dropped,
        )

    # -- connections ------------------------------------------------------

    def _on_accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            writer.transport.abort()
            return
        self._accepted += 1
        self._opened(writer)
        self._spawn(self._serve_inbound(reader, writer))

    async def _serve_inbound(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        where = _format_address(writer.get_extra_info("peername"))
        try:
            async with asyncio.timeout(self._limits.handshake_timeout_s):
                if self._tls is not None:
                    # TLS first, in the handshake's time: a peer whose certificate does not
                    # chain to the CA is refused here, and logged as any refusal.
                    await writer.start_tls(self._tls[0])
                link = await self._handshake(reader, writer, where, expected=None)
        except _HANDSHAKE_ERRORS as exc:
            self._handshake_failures += 1
            logger.warning("refused cluster connection from %s: %s", where, self._reason(exc))
            self._release(writer, False)
            return
        except BaseException:
            self._release(writer, True)
            raise
        await self._links.run(link)

    def _start_dialer(self, address: PeerAddress) -> None:
        self._dialers[address.name] = self._spawn(self._dial_loop(address))

    async def _dial_loop(self, address: PeerAddress) -> None:
        """Dials whenever the peer has no link, backing off between attempts."""
        state = self._links.state(address.name)
        first = True
        while True:
            await state.disconnected.wait()
            if not first:
                await asyncio.sleep(state.backoff.next_delay())
                if state.current is not None:
                    continue
            first = False
            await self._dial_once(address, state)

    async def _dial_once(self, address: PeerAddress, state: PeerState) -> None:
        where = f"{address.host}:{address.port}"
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(self._limits.handshake_timeout_s):
                reader, writer = await self._connect(address)
                self._dialed += 1
                self._opened(writer)
                link = await self._handshake(reader, writer, where, expected=address.name)
        except _HANDSHAKE_ERRORS as exc:
            if writer is not None:
                self._release(writer, False)
            self._dial_failed(address, where, state, exc)
            return
        except BaseException:
            if writer is not None:
                self._release(writer, True)
            raise
        state.last_dial_failure = None
        self._spawn(self._links.run(link))

    async def _connect(self, address: PeerAddress
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(address.host, address.port)
        if self._tls is not None:
            try:
                await writer.start_tls(self._tls[1], server_hostname=address.host)
            except BaseException:
                writer.transport.abort()
                raise
        return reader, writer

    def _dial_failed(
        self, address: PeerAddress, where: str, state: PeerState, exc: BaseException
    ) -> None:
        reason = self._reason(exc)
        if isinstance(exc, HandshakeError | FrameError | TimeoutError):
            self._handshake_failures += 1
        # A peer that is down fails every attempt the same way: say it once, not every backoff.
        level = logging.DEBUG if reason == state.last_dial_failure else logging.WARNING
        state.last_dial_failure = reason
        logger.log(
            level,
            "cannot connect to cluster peer %s at %s: %s (retrying)",
            address.name,
            where,
            reason,
        )

    async def _handshake(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        where: str,
        *,
        expected: str | None,
    ) -> PeerLink:
        """Runs the handshake; the authenticated connection is adopted before this returns."""
        handshake = Handshake(
            self._name,
            self._secret,
            secrets.token_bytes(NONCE_BYTES),
            incarnation=self._incarnation,
            expected_peer=expected,
        )
        decoder = FrameDecoder(MAX_HELLO_BYTES)
        writer.write(encode_frame(handshake.hello()))
        proof = handshake.receive_hello(await _read_handshake_frame(reader, decoder))
        name = handshake.peer_name
        assert name is not None
        state = self._links.state(name)
        state.begin_pending()
        try:
            writer.write(encode_frame(proof))
            identity = handshake.receive_proof(await _read_handshake_frame(reader, decoder))
        except BaseException:
            state.end_pending()
            self._links.forget_if_idle(state)
            raise
        state.end_pending()
        decoder.max_frame_bytes = self._limits.max_frame_bytes
        link = PeerLink(
            peer=identity.name,
            incarnation=identity.incarnation,
            dialed_by=self._name if expected is not None else identity.name,
            address=where,
            reader=reader,
            writer=writer,
            decoder=decoder,
        )
        # No await between end_pending and adopt: a link waiting for this peer's
        # handshakes to settle must see the outcome when it wakes.
        self._links.adopt(state, link)
        return link

    # -- bookkeeping ------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("cluster transport task failed", exc_info=task.exception())

    def _opened(self, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sockets.add(writer)

    def _release(self, writer: asyncio.StreamWriter, abort: bool) -> None:
        if writer not in self._sockets:
            return
        self._sockets.discard(writer)
        if abort:
            writer.transport.abort()
            return
        writer.close()
        closer = self._spawn(self._finish_close(writer))
        self._closers.add(closer)
        closer.add_done_callback(self._closers.discard)

    async def _finish_close(self, writer: asyncio.StreamWriter) -> None:
        """Lets a closed socket flush for a while; a peer that stops reading cannot pin it."""
        try:
            async with asyncio.timeout(_CLOSE_GRACE_S):
                await writer.wait_closed()
        except OSError:  # TimeoutError included
            pass
        finally:
            writer.transport.abort()  # a no-op once the socket is closed

    def _reason(self, exc: BaseException) -> str:
        if isinstance(exc, HandshakeError):
            return exc.reason
        if isinstance(exc, TimeoutError):
            return f"no handshake within {self._limits.handshake_timeout_s:g} s"
        return str(exc) or type(exc).__name__


async def _read_handshake_frame(reader: asyncio.StreamReader, decoder: FrameDecoder) -> bytes:
    while True:
        try:
            frame = decoder.next_frame()
        except FrameTooLargeError as exc:
            raise MalformedHandshakeError(
                f"not a logbroker cluster peer (its first frame would be {exc.size} bytes)"
            ) from None
        if frame is not None:
            return frame
        data = await reader.read(4096)
        if not data:
            raise HandshakeError("connection closed during the handshake")
        decoder.feed(data)


def _format_address(peername: Any) -> str:
    if isinstance(peername, tuple) and len(peername) >= 2:
        host, port = peername[0], peername[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peername)
