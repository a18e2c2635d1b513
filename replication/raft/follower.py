"""How a node takes what its leader sends: entries, commit indexes, snapshots.

Pure functions over the node's `RaftLog` and `ConfigHistory`; they return the
response to send. The caller has already checked the message's term and made
this node a follower of its sender.
"""

from __future__ import annotations

from collections.abc import Iterable

from replication.raft.log_store import RaftLog
from replication.raft.membership import ConfigHistory, Membership
from replication.raft.messages import (
    AppendEntries,
    AppendEntriesResponse,
    Entry,
    EntryKind,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
)


def handle_append(log: RaftLog, history: ConfigHistory, m: AppendEntries) -> AppendEntriesResponse:
    prev_index, prev_term, entries = m.prev_log_index, m.prev_log_term, m.entries
    if prev_index < log.commit_index:
        # Everything up to our commit index is committed, hence equal to the
        # leader's log: skip it. This also covers a prev_index that we have
        # compacted away and so could not check.
        skip = log.commit_index - prev_index
        if skip >= len(entries):
            return _success(m, log.commit_index)
        entries = entries[skip:]
        prev_index = log.commit_index
        prev_term = log.term_at(prev_index) or 0
    appended = log.maybe_append(prev_index, prev_term, entries)
    if appended is None:
        return _rejection(log, m, prev_index)
    if appended.replaced_from is not None:
        history.truncate_from(appended.replaced_from)
        record_configs(history, (e for e in entries if e.index >= appended.replaced_from))
    log.commit_to(min(m.leader_commit, appended.match_index))
    return _success(m, appended.match_index)


def record_configs(history: ConfigHistory, entries: Iterable[Entry]) -> None:
    """Config changes take effect as soon as they are in the log."""
    for entry in entries:
        if entry.kind is EntryKind.CONFIG:
            history.record(entry.index, Membership.decode(entry.data))


def _success(m: AppendEntries, match_index: int) -> AppendEntriesResponse:
    return AppendEntriesResponse(
        source=m.target, target=m.source, term=m.term, success=True, match_index=match_index
    )


def _rejection(log: RaftLog, m: AppendEntries, prev_index: int) -> AppendEntriesResponse:
    """Tell the leader where to look next, skipping our whole conflicting term."""
    conflict_term = log.term_at(prev_index)
    if conflict_term is None:
        conflict_index = log.last_index + 1
    else:
        first_of_term = log.last_index_with_term_at_most(conflict_term - 1, prev_index) + 1
        conflict_index = max(first_of_term, log.commit_index + 1)
    return AppendEntriesResponse(
        source=m.target, target=m.source, term=m.term, success=False,
        reject_index=m.prev_log_index, conflict_term=conflict_term,
        conflict_index=conflict_index,
    )


def handle_heartbeat(log: RaftLog, m: Heartbeat) -> HeartbeatResponse:
    # The leader sends min(our match index, its commit index): every entry up to
    # there is in our log and equal to the leader's.
    log.commit_to(min(m.leader_commit, log.last_index))
    return HeartbeatResponse(source=m.target, target=m.source, term=m.term, round=m.round)


def handle_snapshot(
    log: RaftLog, history: ConfigHistory, m: InstallSnapshot
) -> tuple[InstallSnapshotResponse, bool]:
    """Take the leader's snapshot unless the log already covers it; True if installed."""
    snapshot = m.snapshot
    installed = False
    if snapshot.index <= log.commit_index:
        match_index = log.commit_index
    elif log.match_term(snapshot.index, snapshot.term):
        # Our log already holds everything the snapshot stands for: applying our
        # entries is cheaper than replacing the application's state.
        log.commit_to(snapshot.index)
        match_index = snapshot.index
    else:
        log.restore(snapshot.index, snapshot.term)
        history.reset(snapshot.index, snapshot.membership)
        match_index = snapshot.index
        installed = True
    response = InstallSnapshotResponse(
        source=m.target, target=m.source, term=m.term, match_index=match_index
    )
    return response, installed
