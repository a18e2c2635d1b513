"""The cluster handshake: both ends prove they hold the cluster secret.

Theory of operation. Pure, h11-style: no I/O, no randomness (the nonce comes
in), the shell carries the bytes. Each side sends a hello, one frame:

    magic b"LBCT" | version u16 | incarnation 8 bytes | nonce 32 bytes | name_len u8 | name utf-8

and, once it has the peer's hello, a proof, one frame of 32 bytes:

    HMAC-SHA256(secret, DOMAIN | u16 len | prover's hello | u16 len | verifier's hello)

The verifier's hello carries the verifier's fresh nonce, so a proof answers
one challenge only (no replay), and it names prover and verifier in order, so
it is direction-bound: a proof reflected back to the node that made it does
not verify (the order is swapped, and a peer may not use our own name or
nonce). The secret itself never leaves the node. Both sides send their proof
before checking the peer's, so neither waits for the other and a wrong secret
is reported on both ends.

States: AWAIT_HELLO -> AWAIT_PROOF -> DONE; any error -> FAILED, after which
every call raises. The magic and version come first and keep their place in
every future version, so an old node reports a version mismatch, not garbage.
The incarnation (random per transport start) lets the shell tell a restarted
peer from a second connection of the same process.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import struct
from dataclasses import dataclass

MAGIC = b"LBCT"
PROTOCOL_VERSION = 1
DOMAIN = b"logbroker-cluster-v1"
NONCE_BYTES = 32
INCARNATION_BYTES = 8
PROOF_BYTES = 32
MAX_NAME_BYTES = 255
MAX_HELLO_BYTES = 4 + 2 + INCARNATION_BYTES + NONCE_BYTES + 1 + MAX_NAME_BYTES

_PREFIX = struct.Struct(">4sH")
_LEN16 = struct.Struct(">H")


class HandshakeError(Exception):
    """The peer was not admitted; `reason` is the text for the log line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WrongSecretError(HandshakeError):
    def __init__(self) -> None:
        super().__init__("wrong cluster secret")


class ProtocolVersionError(HandshakeError):
    def __init__(self, theirs: int) -> None:
        super().__init__(
            f"peer speaks cluster protocol version {theirs}, this node speaks {PROTOCOL_VERSION}"
        )
        self.theirs = theirs


class MalformedHandshakeError(HandshakeError):
    def __init__(self, what: str) -> None:
        super().__init__(f"malformed handshake: {what}")


class UnexpectedPeerError(HandshakeError):
    """The peer authenticated but is not who the dialer wanted, or claims our name."""


def check_node_name(name: str) -> bytes:
    encoded = name.encode("utf-8")
    if not 0 < len(encoded) <= MAX_NAME_BYTES:
        raise ValueError(f"node name must be 1..{MAX_NAME_BYTES} bytes of UTF-8, got {name!r}")
    return encoded


@dataclass(frozen=True)
class Hello:
    name: str
    nonce: bytes
    incarnation: bytes
    version: int = PROTOCOL_VERSION

    def encode(self) -> bytes:
        name = check_node_name(self.name)
        if len(self.nonce) != NONCE_BYTES or len(self.incarnation) != INCARNATION_BYTES:
            raise ValueError("nonce must be 32 bytes and incarnation 8 bytes")
        return b"".join(
            (
                _PREFIX.pack(MAGIC, self.version),
                self.incarnation,
                self.nonce,
                bytes([len(name)]),
                name,
            )
        )

    @classmethod
    def decode(cls, payload: bytes) -> Hello:
        if len(payload) < _PREFIX.size:
            raise MalformedHandshakeError(f"hello of {len(payload)} bytes is too short")
        magic, version = _PREFIX.unpack_from(payload)
        if magic != MAGIC:
            raise MalformedHandshakeError("not a logbroker cluster hello")
        if version != PROTOCOL_VERSION:
            raise ProtocolVersionError(version)
        at = _PREFIX.size
        incarnation = payload[at : at + INCARNATION_BYTES]
        nonce = payload[at + INCARNATION_BYTES : at + INCARNATION_BYTES + NONCE_BYTES]
        at += INCARNATION_BYTES + NONCE_BYTES
        if len(payload) < at + 1:
            raise MalformedHandshakeError("hello is truncated")
        name_len = payload[at]
        raw_name = payload[at + 1 :]
        if name_len == 0 or len(raw_name) != name_len:
            raise MalformedHandshakeError("hello has a bad node name length")
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedHandshakeError("node name is not UTF-8") from None
        return cls(name=name, nonce=nonce, incarnation=incarnation, version=version)


@dataclass(frozen=True)
class PeerIdentity:
    """Who is on the other end, once the handshake is done."""

    name: str
    incarnation: bytes


class _State(enum.Enum):
    AWAIT_HELLO = "await-hello"
    AWAIT_PROOF = "await-proof"
    DONE = "done"
    FAILED = "failed"


def compute_proof(secret: bytes, prover_hello: bytes, verifier_hello: bytes) -> bytes:
    message = b"".join(
        (
            DOMAIN,
            _LEN16.pack(len(prover_hello)),
            prover_hello,
            _LEN16.pack(len(verifier_hello)),
            verifier_hello,
        )
    )
    return hmac.new(secret, message, hashlib.sha256).digest()


class Handshake:
    """One side of one connection's handshake.

    Usage: send `hello()`; pass the peer's first frame to `receive_hello` and
    send what it returns (our proof); pass the peer's second frame to
    `receive_proof`, which returns the authenticated `PeerIdentity`.
    `expected_peer` (the dialer knows whom it dialed) refuses any other name
    before our proof is sent, so the wrong node never sees a completed handshake.
    """

    def __init__(
        self,
        node_name: str,
        secret: bytes,
        nonce: bytes,
        *,
        incarnation: bytes = bytes(INCARNATION_BYTES),
        expected_peer: str | None = None,
    ) -> None:
        if not secret:
            raise ValueError("the cluster secret must not be empty")
        self._secret = secret
        self._hello = Hello(name=node_name, nonce=nonce, incarnation=incarnation).encode()
        self._name = node_name
        self._nonce = nonce
        self._expected = expected_peer
        self._state = _State.AWAIT_HELLO
        self._peer_hello: Hello | None = None
        self._peer_hello_bytes = b""

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    @property
    def peer_name(self) -> str | None:
        """The name the peer claims (authenticated only once `done`)."""
        return self._peer_hello.name if self._peer_hello is not None else None

    def hello(self) -> bytes:
        return self._hello

    def receive_hello(self, payload: bytes) -> bytes:
        """Check the peer's hello; returns our proof, to send."""
        self._expect(_State.AWAIT_HELLO)
        try:
            peer = Hello.decode(payload)
            if peer.name == self._name:
                raise UnexpectedPeerError(f"peer claims this node's own name {peer.name!r}")
            if self._expected is not None and peer.name != self._expected:
                raise UnexpectedPeerError(f"peer is {peer.name!r}, expected {self._expected!r}")
            if peer.nonce == self._nonce:
                raise MalformedHandshakeError("peer echoed this node's nonce")
        except HandshakeError:
            self._state = _State.FAILED
            raise
        self._peer_hello, self._peer_hello_bytes = peer, payload
        self._state = _State.AWAIT_PROOF
        return compute_proof(self._secret, self._hello, payload)

    def receive_proof(self, payload: bytes) -> PeerIdentity:
        """Check the peer's proof; returns who the peer is."""
        self._expect(_State.AWAIT_PROOF)
        assert self._peer_hello is not None
        expected = compute_proof(self._secret, self._peer_hello_bytes, self._hello)
        if len(payload) != PROOF_BYTES:
            self._state = _State.FAILED
            raise MalformedHandshakeError(f"proof of {len(payload)} bytes, expected {PROOF_BYTES}")
        if not hmac.compare_digest(payload, expected):
            self._state = _State.FAILED
            raise WrongSecretError()
        self._state = _State.DONE
        return PeerIdentity(self._peer_hello.name, self._peer_hello.incarnation)

    def _expect(self, state: _State) -> None:
        if self._state is not state:
            current = self._state
            self._state = _State.FAILED
            raise HandshakeError(f"handshake step out of order (state {current.value})")
