"""Opening a log's directory: which segments it holds and how much to scan.

Theory of operation (see `log.py`): a sealed segment whose index files are
valid was fsynced before they were written, so it is trusted without a scan.
Opening walks back from the newest segment to the last one with valid index
files and scans only the segments after it (normally just the active one),
so the time to open does not grow with the size of the log. A scanned
segment that is not the last and ends early (a crash lost unsynced data)
cuts the log there: the newer segments are dropped, and offsets stay dense.
Index files left without their data are removed.
"""

from __future__ import annotations

import os
from itertools import pairwise

from segments.filesystem import FileSystem
from segments.log_config import RecoveryReport
from segments.segment import NAME_DIGITS, Segment


def recover_segments(fs: FileSystem, directory: str, initial_offset: int, interval: int
                     ) -> tuple[list[Segment], RecoveryReport]:
    """The log's segments, oldest first, after recovery; an empty directory gets one
    new segment at `initial_offset`."""
    bases = scan_directory(fs, directory)
    if not bases:
        segment = Segment.create(fs, directory, initial_offset, interval)
        fs.sync_dir(directory)
        return [segment], RecoveryReport(0, 0, 0)
    sealed = [Segment.sealed(fs, directory, base, following, interval)
              for base, following in pairwise(bases)]
    first_unconfirmed = len(sealed)
    while first_unconfirmed > 0 and not sealed[first_unconfirmed - 1].has_confirmed_indexes():
        first_unconfirmed -= 1
    segments = sealed[:first_unconfirmed]
    scanned = truncated = 0
    for slot in range(first_unconfirmed, len(bases)):
        segment, cut = Segment.recover(fs, directory, bases[slot], interval)
        segments.append(segment)
        scanned, truncated = scanned + segment.size + cut, truncated + cut
        if slot == len(bases) - 1:
            break
        if segment.next_offset != bases[slot + 1]:
            _drop_segments(fs, directory, bases[slot + 1 :], interval)  # unsynced data lost
            segment.remove_index_files()
            fs.sync_dir(directory)
            break
        segment.seal()
        segment.confirm_seal()
    return segments, RecoveryReport(len(bases), scanned, truncated)


def _drop_segments(fs: FileSystem, directory: str, bases: list[int], interval: int) -> None:
    for base in bases:
        Segment.sealed(fs, directory, base, base, interval).delete()


def scan_directory(fs: FileSystem, directory: str) -> list[int]:
    """Base offsets of the segments; removes index files left without their data."""
    names = fs.listdir(directory)
    bases: list[int] = []
    for name in names:
        stem, dot, suffix = name.partition(".")
        if dot and suffix == "log" and len(stem) == NAME_DIGITS and stem.isdigit():
            bases.append(int(stem))
    known = set(bases)
    for name in names:
        stem, _, suffix = name.partition(".")
        if suffix in ("index", "timeindex") and stem.isdigit() and int(stem) not in known:
            fs.remove(os.path.join(directory, name))
    return sorted(bases)
