import random

from segments.memory_inode import Inode, apply_content


def test_apply_content_appends_cuts_and_extends_with_zeros() -> None:
    buffer = bytearray(b"abc")
    apply_content(buffer, b"de")
    apply_content(buffer, 2)
    assert buffer == b"ab"
    apply_content(buffer, 4)
    assert buffer == b"ab\x00\x00"


def test_sync_makes_the_pending_operations_durable() -> None:
    inode = Inode()
    for op in (b"hello", 4, b"!"):
        apply_content(inode.current, op)
        inode.pending.append(op)
    inode.sync()
    assert inode.durable == inode.current == b"hell!" and inode.pending == []


def test_recover_keeps_a_prefix_of_the_pending_writes_possibly_torn() -> None:
    seen = set()
    for seed in range(200):
        inode = Inode(durable=bytearray(b"ok"), current=bytearray(b"ok"))
        for op in (b"-first", b"-second"):
            apply_content(inode.current, op)
            inode.pending.append(op)
        inode.recover(random.Random(seed))
        after = bytes(inode.current)
        assert b"ok-first-second".startswith(after) and after.startswith(b"ok")
        assert inode.durable == inode.current and inode.pending == []
        seen.add(after)
    assert {b"ok", b"ok-first", b"ok-first-second"} <= seen  # whole writes kept or lost
    assert len(seen) > 3  # and torn ones


def test_recover_without_a_crash_drops_what_was_not_synced() -> None:
    inode = Inode(durable=bytearray(b"ok"), current=bytearray(b"ok+"), pending=[b"+"])
    inode.recover(None)
    assert inode.current == b"ok" and inode.pending == []
