"""The pieces of `MemoryFileSystem`'s state: files (inodes) and directories.

Each holds a current view (what reads see) and a durable view (what survives
a power loss) with the pending operations between them; see
`memory_filesystem.py` for the theory of operation and the invariants.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# An append (the bytes written) or a truncation (the new size).
ContentOp = bytes | int


def apply_content(buffer: bytearray, op: ContentOp) -> None:
    if isinstance(op, bytes):
        buffer += op
    elif op <= len(buffer):
        del buffer[op:]
    else:
        buffer.extend(bytes(op - len(buffer)))


def _torn(op: ContentOp, rng: random.Random) -> ContentOp:
    """The part of a write that reached the disk before the power went."""
    if isinstance(op, bytes) and op:
        return op[: rng.randrange(len(op))]
    return op


@dataclass(eq=False)
class Inode:
    current: bytearray = field(default_factory=bytearray)
    durable: bytearray = field(default_factory=bytearray)
    pending: list[ContentOp] = field(default_factory=list)
    # Only linked inodes count against the capacity.
    linked: bool = True

    def sync(self) -> None:
        for op in self.pending:
            apply_content(self.durable, op)
        self.pending.clear()

    def recover(self, rng: random.Random | None) -> None:
        """Replace the current content by what a power loss leaves on disk."""
        if rng is not None and self.pending:
            kept = self.pending[: rng.randint(0, len(self.pending))]
            # Half of the time the last write completes, so crashes also land
            # cleanly between writes rather than almost always inside one.
            if kept and not isinstance(kept[-1], int) and rng.randrange(2):
                kept[-1] = _torn(kept[-1], rng)
            for op in kept:
                apply_content(self.durable, op)
        self.pending.clear()
        self.current = bytearray(self.durable)


@dataclass(eq=False)
class Link:
    """Create `name` (inode set) or remove it (inode None)."""

    seq: int
    directory: str
    name: str
    inode: Inode | None


@dataclass(eq=False)
class Rename:
    seq: int
    source_dir: str
    source_name: str
    destination_dir: str
    destination_name: str
    inode: Inode


NamespaceOp = Link | Rename


@dataclass(eq=False)
class Directory:
    current: dict[str, Inode] = field(default_factory=dict)
    durable: dict[str, Inode] = field(default_factory=dict)
    pending: list[NamespaceOp] = field(default_factory=list)
    subdirs: set[str] = field(default_factory=set)
