"""OutputRound: connections written to during a read are flushed once, when it ends."""

from api.amqp.output_round import OutputRound


def test_flushes_collected_during_a_read_run_once_at_its_end() -> None:
    output_round = OutputRound()
    flushed: list[str] = []
    output_round.active = True
    output_round.add(lambda: flushed.append("consumer-1"))
    output_round.add(lambda: flushed.append("consumer-2"))
    assert flushed == []
    output_round.end()
    assert flushed == ["consumer-1", "consumer-2"]
    assert not output_round.active
    output_round.end()  # nothing collected since: nothing runs twice
    assert flushed == ["consumer-1", "consumer-2"]


def test_a_flush_that_writes_more_output_does_not_run_in_the_same_round() -> None:
    output_round = OutputRound()
    flushed: list[str] = []

    def flush_and_notify() -> None:
        flushed.append("first")
        assert not output_round.active  # a connection notified now schedules a turn later

    output_round.active = True
    output_round.add(flush_and_notify)
    output_round.end()
    assert flushed == ["first"]
