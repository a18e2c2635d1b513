"""The `r.fetch` request and its answers as cluster envelopes (replication/queue/fetch_protocol.py).

Request header: vhost `v`, queue `q`, epoch `e`, next offset `n`, last epoch
`le`, log start `ls`, acked version `av`, high watermark `hw`. Answers:
`stream` (`hw`, `start`, `epochs`, `av`, `acked` when sent; the batches as
blobs, never through JSON), `truncate` (`to`, `epoch`), `reset` (`start`),
`refused` (`reason`).
"""

from __future__ import annotations

from typing import Any

from logbroker.cluster.envelope import Envelope
from replication.queue.epoch_history import EpochHistory
from replication.queue.fetch_protocol import FetchAnswer, FetchRequest, StreamAnswer
from replication.queue.replication_leader import Refuse, Reset, Truncate

FETCH = "r.fetch"


def request_envelope(vhost: str, name: str, request: FetchRequest) -> Envelope:
    return Envelope(FETCH, {"v": vhost, "q": name, "e": request.epoch,
                            "n": request.next_offset, "le": request.last_epoch,
                            "ls": request.log_start, "av": request.acked_version,
                            "hw": request.high_watermark})


def request_of(envelope: Envelope) -> tuple[str, str, FetchRequest]:
    header = envelope.header
    next_offset = int(header["n"])
    return str(header["v"]), str(header["q"]), FetchRequest(
        int(header["e"]), next_offset, int(header["le"]), int(header.get("ls", next_offset)),
        int(header["av"]), int(header["hw"]))


def answer_envelope(answer: FetchAnswer) -> Envelope:
    if isinstance(answer, StreamAnswer):
        header: dict[str, Any] = {
            "hw": answer.high_watermark, "start": answer.log_start,
            "epochs": [[e.epoch, e.start_offset] for e in answer.epochs],
            "av": answer.acked_version,
        }
        if answer.acked is not None:
            header["acked"] = [[lo, hi] for lo, hi in answer.acked]
        return Envelope("stream", header, answer.batches)
    if isinstance(answer, Truncate):
        return Envelope("truncate", {"to": answer.to_offset, "epoch": answer.epoch})
    if isinstance(answer, Reset):
        return Envelope("reset", {"start": answer.start_offset})
    return Envelope("refused", {"reason": answer.reason})


def answer_of(envelope: Envelope) -> FetchAnswer:
    header = envelope.header
    if envelope.op == "stream":
        acked = header.get("acked")
        return StreamAnswer(
            int(header["hw"]), int(header["start"]),
            EpochHistory.from_json(header["epochs"]).entries, int(header["av"]),
            None if acked is None else tuple((int(lo), int(hi)) for lo, hi in acked),
            tuple(envelope.blobs))
    if envelope.op == "truncate":
        return Truncate(int(header["to"]), int(header["epoch"]))
    if envelope.op == "reset":
        return Reset(int(header["start"]))
    return Refuse(str(header.get("reason", envelope.op)))
