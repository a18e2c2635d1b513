from api.http.leases import LeaseTable, TooManyLeases


def test_leases_settle_once_and_only_by_their_owner() -> None:
    table = LeaseTable()
    target = object()
    first = table.grant(target, "/", "q", 10, "alice", deadline_ms=1000)
    second = table.grant(target, "/", "q", 11, "alice", deadline_ms=1000)
    assert (first.tag, second.tag) == (1, 2)
    settled, unknown = table.settle([first.tag], "bob", "/", "q")
    assert settled == [] and unknown == [first.tag]
    settled, unknown = table.settle([first.tag], "alice", "/", "other")
    assert settled == [] and unknown == [first.tag]
    settled, unknown = table.settle([first.tag, 99], "alice", "/", "q")
    assert [lease.offset for lease in settled] == [10] and unknown == [99]
    settled, unknown = table.settle([first.tag], "alice", "/", "q")
    assert settled == [] and unknown == [first.tag]
    assert len(table) == 1


def test_expired_leases_come_back_in_deadline_order_and_cannot_be_settled() -> None:
    table = LeaseTable()
    late = table.grant(None, "/", "q", 1, "u", deadline_ms=2000)
    early = table.grant(None, "/", "q", 2, "u", deadline_ms=1000)
    assert table.next_deadline_ms() == 1000
    assert table.expire(999) == []
    assert [lease.tag for lease in table.expire(1000)] == [early.tag]
    assert table.next_deadline_ms() == 2000
    table.settle([late.tag], "u", "/", "q")
    assert table.next_deadline_ms() is None  # the settled lease's deadline is skipped
    assert table.expire(5000) == []
    assert table.settle([early.tag], "u", "/", "q")[1] == [early.tag]


def test_the_table_is_bounded_and_drops_a_deleted_queue() -> None:
    table = LeaseTable(limit=2)
    gone, kept = object(), object()
    table.grant(gone, "/", "a", 0, "u", 10)
    table.grant(kept, "/", "b", 0, "u", 10)
    assert not table.has_room(1)
    try:
        table.grant(kept, "/", "b", 1, "u", 10)
    except TooManyLeases:
        pass
    else:
        raise AssertionError("a full table must refuse")
    table.drop_target(gone)
    assert len(table) == 1 and table.has_room(1)
    assert [lease.target for lease in table.expire(10)] == [kept]
