import pytest

from replication.transport.handshake import (
    PROTOCOL_VERSION,
    Handshake,
    HandshakeError,
    Hello,
    MalformedHandshakeError,
    PeerIdentity,
    ProtocolVersionError,
    UnexpectedPeerError,
    WrongSecretError,
)

SECRET = b"s3cret-cookie"
A_NONCE = bytes(range(32))
B_NONCE = bytes(range(100, 132))
A_INC = b"AAAAAAAA"
B_INC = b"BBBBBBBB"


def pair(
    a_secret: bytes = SECRET, b_secret: bytes = SECRET, *, expected: str | None = None
) -> tuple[Handshake, Handshake]:
    a = Handshake("n1@host", a_secret, A_NONCE, incarnation=A_INC, expected_peer=expected)
    b = Handshake("n2@host", b_secret, B_NONCE, incarnation=B_INC)
    return a, b


def test_both_sides_authenticate_each_other() -> None:
    a, b = pair(expected="n2@host")
    a_proof = a.receive_hello(b.hello())
    b_proof = b.receive_hello(a.hello())
    assert a.receive_proof(b_proof) == PeerIdentity("n2@host", B_INC)
    assert b.receive_proof(a_proof) == PeerIdentity("n1@host", A_INC)
    assert a.done and b.done
    assert a_proof != b_proof  # direction-bound


def test_the_secret_is_never_sent() -> None:
    a, b = pair()
    messages = [a.hello(), b.hello(), a.receive_hello(b.hello()), b.receive_hello(a.hello())]
    assert not any(SECRET in message for message in messages)


def test_wrong_secret_is_refused_on_both_sides() -> None:
    a, b = pair(b_secret=b"another secret")
    a_proof = a.receive_hello(b.hello())
    b_proof = b.receive_hello(a.hello())
    with pytest.raises(WrongSecretError, match="wrong cluster secret"):
        a.receive_proof(b_proof)
    with pytest.raises(WrongSecretError):
        b.receive_proof(a_proof)
    assert not a.done and not b.done


def test_a_reflected_proof_is_refused() -> None:
    # An attacker without the secret connects to n1, claims to be n2 and hands
    # n1's own proof back to it.
    a, _ = pair()
    attacker_hello = Hello("n2@host", B_NONCE, B_INC).encode()
    own_proof = a.receive_hello(attacker_hello)
    with pytest.raises(WrongSecretError):
        a.receive_proof(own_proof)


def test_a_reflected_hello_is_refused() -> None:
    a, _ = pair()
    with pytest.raises(UnexpectedPeerError, match="own name"):
        a.receive_hello(a.hello())


def test_an_echoed_nonce_is_refused() -> None:
    a, _ = pair()
    with pytest.raises(MalformedHandshakeError, match="nonce"):
        a.receive_hello(Hello("n2@host", A_NONCE, B_INC).encode())


def test_a_proof_for_another_challenge_is_refused() -> None:
    # A proof recorded from an earlier session answered another nonce.
    a, b = pair()
    b.receive_hello(a.hello())
    old_b = Handshake("n2@host", SECRET, B_NONCE, incarnation=B_INC)
    earlier_a = Handshake("n1@host", SECRET, bytes(32), incarnation=A_INC)
    recorded = old_b.receive_hello(earlier_a.hello())
    a.receive_hello(b.hello())
    with pytest.raises(WrongSecretError):
        a.receive_proof(recorded)


def test_the_dialer_refuses_a_peer_with_another_name_before_proving_itself() -> None:
    a, b = pair(expected="n3@host")
    with pytest.raises(UnexpectedPeerError, match="expected 'n3@host'"):
        a.receive_hello(b.hello())
    with pytest.raises(HandshakeError, match="out of order"):
        a.receive_proof(b"x" * 32)


def test_another_protocol_version_is_refused_on_both_sides() -> None:
    a, _ = pair()
    future = Hello("n2@host", B_NONCE, B_INC, version=PROTOCOL_VERSION + 1).encode()
    with pytest.raises(ProtocolVersionError, match="version 2, this node speaks 1"):
        a.receive_hello(future)
    # the magic and version keep their place, so the old node can say so clearly
    # even if the rest of a future hello looks different
    with pytest.raises(ProtocolVersionError):
        Hello.decode(future[:6] + b"anything else")


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"", "too short"),
        (b"GET / HTTP/1.1", "not a logbroker cluster hello"),
        (Hello("n2", B_NONCE, B_INC).encode()[:20], "truncated"),
        (Hello("n2", B_NONCE, B_INC).encode()[:-1], "name length"),
        (Hello("n2", B_NONCE, B_INC).encode() + b"x", "name length"),
        (Hello("n2", B_NONCE, B_INC).encode()[:-3] + b"\x00", "name length"),
        (Hello("n2", B_NONCE, B_INC).encode()[:-2] + b"\xff\xfe", "UTF-8"),
    ],
)
def test_malformed_hello_is_refused(payload: bytes, match: str) -> None:
    a, _ = pair()
    with pytest.raises(MalformedHandshakeError, match=match):
        a.receive_hello(payload)
    with pytest.raises(HandshakeError):  # and the handshake is over
        a.receive_hello(Hello("n2", B_NONCE, B_INC).encode())


def test_malformed_proof_is_refused() -> None:
    a, b = pair()
    a.receive_hello(b.hello())
    with pytest.raises(MalformedHandshakeError, match="proof of 3 bytes"):
        a.receive_proof(b"abc")


def test_names_and_secrets_are_checked() -> None:
    with pytest.raises(ValueError, match="node name"):
        Handshake("", SECRET, A_NONCE)
    with pytest.raises(ValueError, match="node name"):
        Handshake("n" * 256, SECRET, A_NONCE)
    with pytest.raises(ValueError, match="secret"):
        Handshake("n1", b"", A_NONCE)
    with pytest.raises(ValueError, match="nonce"):
        Handshake("n1", SECRET, b"short")
    assert Hello.decode(Hello("é" * 127, A_NONCE, A_INC).encode()).name == "é" * 127
