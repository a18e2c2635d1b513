"""`PerfSettings`: one run's options, checked together (each bad one named by its flag)."""

from __future__ import annotations

from dataclasses import dataclass

from api.perf.topology_plan import TopologyPlan

STAMP_BYTES = 12  # the send time (ns) and the producer's sequence number, in every body
MAX_SIZE = 16 * 1024 * 1024
DEFAULT_TIME_S = 60.0  # no --time, --pmessages or --cmessages: a run still ends
MAX_TIME_S = 86_400.0
MAX_CLIENTS = 1000  # producers + consumers: one connection each
DEFAULT_WS_WINDOW = 1000  # the WebSocket always confirms: unconfirmed publishes in flight


@dataclass(frozen=True)
class PerfSettings:
    topology: TopologyPlan
    producers: int = 1
    consumers: int = 1
    rate: float | None = None  # per producer, msg/s
    consumer_rate: float | None = None  # per consumer, msg/s
    size: int = STAMP_BYTES
    persistent: bool = False
    mandatory: bool = False
    confirm: int | None = None  # the window of unconfirmed publishes
    qos: int = 500
    multi_ack_every: int = 0
    autoack: bool = False
    time_s: float = DEFAULT_TIME_S
    pmessages: int | None = None
    cmessages: int | None = None
    auto_delete: bool = True
    predeclared: bool = False

    def check(self) -> None:
        """ValueError naming the flag of the first option that makes no sense."""
        if self.producers + self.consumers == 0:
            raise ValueError("--producers and --consumers are both 0: nothing to run")
        if self.producers + self.consumers > MAX_CLIENTS:
            raise ValueError(f"--producers + --consumers is at most {MAX_CLIENTS}")
        if not STAMP_BYTES <= self.size <= MAX_SIZE:
            raise ValueError(f"--size must be between {STAMP_BYTES} (the timestamp) and "
                             f"{MAX_SIZE}, not {self.size}")
        if not 0 < self.time_s <= MAX_TIME_S:
            raise ValueError(f"--time must be above 0 and at most {MAX_TIME_S:g} s")
        if self.qos and self.multi_ack_every > self.qos:
            raise ValueError(f"--multi-ack-every ({self.multi_ack_every}) above --qos "
                             f"({self.qos}) would wait for deliveries the prefetch holds back")
        if self.autoack and self.multi_ack_every:
            raise ValueError("--multi-ack-every needs acks: drop --autoack")
        if self.consumers and not self.autoack and not self.qos:
            raise ValueError("--qos 0 lets the broker send without limit while this process "
                             "holds the deliveries: give a prefetch (default 500)")
        if self.consumer_rate is not None and self.autoack:
            raise ValueError("--consumer-rate needs acks (drop --autoack): else nothing "
                             "bounds the deliveries waiting in this process")

    @property
    def time_limit_ms(self) -> int:
        return int(self.time_s * 1000)
