"""`r.fetch` on the cluster link (fetch_wire.py): every request and answer survives the
envelope's binary form unchanged, batches as blobs."""

import pytest

from logbroker.cluster.envelope import Envelope, decode_envelope, encode_envelope
from logbroker.cluster.fetch_wire import (
    answer_envelope,
    answer_of,
    request_envelope,
    request_of,
)
from replication.queue.epoch_history import EpochStart
from replication.queue.fetch_protocol import FetchAnswer, FetchRequest, StreamAnswer
from replication.queue.replication_leader import Refuse, Reset, Truncate


def _over_the_wire(envelope: Envelope) -> Envelope:
    return decode_envelope(encode_envelope(envelope))


def test_a_request_round_trips() -> None:
    request = FetchRequest(3, 120, 2, 40, (3 << 32) + 7, 118)
    envelope = _over_the_wire(request_envelope("/", "orders", request))
    assert envelope.op == "r.fetch"
    assert request_of(envelope) == ("/", "orders", request)


def test_a_request_without_a_log_start_takes_its_next_offset() -> None:
    header = {"v": "/", "q": "q", "e": 1, "n": 9, "le": 1, "av": -1, "hw": 0}
    assert request_of(Envelope("r.fetch", header))[2].log_start == 9


@pytest.mark.parametrize("answer", [
    StreamAnswer(10, 2, (EpochStart(1, 0), EpochStart(3, 8)), 5, ((0, 4), (6, 7)),
                 (b"batch-1", b"batch-2")),
    StreamAnswer(10, 0, (EpochStart(1, 0),), 5, None, ()),
    Truncate(8, 1),
    Reset(40),
    Refuse("the queue is at epoch 4 here, the fetch says 3"),
])
def test_every_answer_round_trips(answer: FetchAnswer) -> None:
    assert answer_of(_over_the_wire(answer_envelope(answer))) == answer
