"""`Leader`: what a node does while it leads: replicate, commit, heartbeat, hand over.

The leader keeps a `Progress` per other member (voters and learners) and
sends each one AppendEntries from its `next_index` (see `progress.py` for the
pacing), or the latest snapshot when those entries are compacted. It commits
the highest index that a majority of voters hold, but only if that entry is of
its own term (Raft, figure 8): an older-term entry is committed only
indirectly, by the current-term no-op appended when the leader took over.
Learners get the log like everyone else but never count.
"""

from __future__ import annotations

from typing import Protocol

from replication.raft.config import RaftConfig
from replication.raft.errors import InvariantError
from replication.raft.log_store import RaftLog
from replication.raft.membership import Membership
from replication.raft.messages import (
    AppendEntries,
    AppendEntriesResponse,
    Heartbeat,
    HeartbeatResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
    Message,
    Snapshot,
    TimeoutNow,
)
from replication.raft.progress import Progress, ProgressState, quorum_index


class LeaderHost(Protocol):
    """The parts of the node a leader works with."""

    @property
    def id(self) -> str: ...

    @property
    def term(self) -> int: ...

    @property
    def config(self) -> RaftConfig: ...

    @property
    def raft_log(self) -> RaftLog: ...

    @property
    def membership(self) -> Membership: ...

    @property
    def snapshot(self) -> Snapshot | None: ...



class Leader:
    def __init__(self, host: LeaderHost, outbox: list[Message]) -> None:
        self._host = host
        self._outbox = outbox
        self.progress: dict[str, Progress] = {}
        self.transferee: str | None = None
        self._transfer_elapsed = 0
        self._heartbeat_elapsed = 0
        self._heartbeat_round = 0
        self.sync_members()

    # ------------------------------------------------------------ membership

    def sync_members(self) -> None:
        """Track exactly the members of the latest membership, other than ourselves."""
        members = self._host.membership.nodes - {self._host.id}
        for gone in set(self.progress) - members:
            del self.progress[gone]
        next_index = self._host.raft_log.last_index + 1
        for node in sorted(members - set(self.progress)):
            # Counted as active until the first quorum check, like a fresh leader's peers.
            self.progress[node] = Progress(next_index=next_index, recent_active=True)
        if self.transferee is not None and self.transferee not in members:
            self.transferee = None

    # ----------------------------------------------------------- replication

    def send_append(self, peer: str, send_if_empty: bool = True) -> bool:
        """Send `peer` what it lacks from its `next_index`; False if nothing was sent."""
        progress = self.progress[peer]
        if progress.is_paused(self._host.config.max_inflight):
            return False
        log = self._host.raft_log
        prev_index = progress.next_index - 1
        prev_term = log.term_at(prev_index)
        if prev_term is None:
            return self._send_snapshot(peer, progress)
        entries = log.slice(progress.next_index, log.last_index + 1,
                            self._host.config.max_entries_per_append)
        if not entries and not send_if_empty:
            return False
        self._outbox.append(AppendEntries(
            source=self._host.id, target=peer, term=self._host.term,
            prev_log_index=prev_index, prev_log_term=prev_term, entries=tuple(entries),
            leader_commit=log.commit_index,
        ))
        progress.sent_entries(entries[-1].index if entries else None, self._heartbeat_round)
        progress.sent_commit = log.commit_index
        return True

    def _send_snapshot(self, peer: str, progress: Progress) -> bool:
        snapshot = self._host.snapshot
        if snapshot is None:
            raise InvariantError("the log is compacted but there is no snapshot")
        self._outbox.append(InstallSnapshot(
            source=self._host.id, target=peer, term=self._host.term, snapshot=snapshot
        ))
        progress.become_snapshot(snapshot.index)
        return True

    def send_all(self, peer: str) -> None:
        """Fill `peer`'s window with everything it lacks (or probe it, once, if in PROBE)."""
        probing = self.progress[peer].state is ProgressState.PROBE
        while self.send_append(peer, send_if_empty=probing):
            pass

    def broadcast_append(self) -> None:
        for peer in self.progress:
            self.send_all(peer)

    def broadcast_commit(self) -> None:
        for peer in self.progress:
            self._maybe_send_commit(peer)

    def _maybe_send_commit(self, peer: str) -> None:
        """Tell an idle follower a newer commit index without waiting for a heartbeat.

        A follower with appends in flight learns it from the next one instead.
        """
        progress = self.progress[peer]
        if progress.sent_commit < self._host.raft_log.commit_index and (
            progress.state is ProgressState.REPLICATE and not progress.inflight
        ):
            self.send_append(peer)

    def maybe_commit(self) -> bool:
        """Commit what a majority of voters hold, if it is of this term; True if moved."""
        log = self._host.raft_log
        matches = {peer: progress.match_index for peer, progress in self.progress.items()}
        matches[self._host.id] = log.last_index
        index = quorum_index(matches, self._host.membership.voters)
        if index > log.commit_index and log.term_at(index) == self._host.term:
            return log.commit_to(index)
        return False

    # ------------------------------------------------------------- responses

    def on_append_response(self, m: AppendEntriesResponse) -> bool:
        """Returns True if the commit index moved."""
        progress = self.progress.get(m.source)
        if progress is None:
            return False
        progress.recent_active = True
        if not m.success:
            if progress.reject(m.reject_index, self._next_guess(m)):
                self.send_append(m.source)
            return False
        stale = m.match_index < progress.match_index
        updated = progress.acknowledge(m.match_index)
        if (progress.state is ProgressState.PROBE and not stale) or (
            progress.state is ProgressState.SNAPSHOT
            and progress.match_index >= progress.pending_snapshot
        ):
            progress.become_replicate()
        committed = updated and self.maybe_commit()
        self.send_all(m.source)
        self._maybe_send_commit(m.source)
        self._maybe_finish_transfer(m.source)
        return committed

    def _next_guess(self, m: AppendEntriesResponse) -> int:
        """Where to try next after a rejection, from the follower's hint."""
        if m.conflict_term is None:
            return m.conflict_index
        log = self._host.raft_log
        index = log.last_index_with_term_at_most(m.conflict_term, m.reject_index)
        if log.term_at(index) == m.conflict_term:
            # We hold that term too: both logs agree up to our last entry of it.
            return index + 1
        return m.conflict_index

    def on_heartbeat_response(self, m: HeartbeatResponse) -> None:
        progress = self.progress.get(m.source)
        if progress is None:
            return
        progress.recent_active = True
        if progress.state is ProgressState.REPLICATE and progress.lost_append(m.round):
            progress.become_probe()
        if progress.state is ProgressState.PROBE:
            # One probe per heartbeat round: this also resends a lost probe.
            progress.probe_sent = False
            self.send_append(m.source)
        else:
            self.send_all(m.source)

    def on_snapshot_response(self, m: InstallSnapshotResponse) -> bool:
        progress = self.progress.get(m.source)
        if progress is None:
            return False
        progress.recent_active = True
        updated = progress.acknowledge(m.match_index)
        if progress.state is ProgressState.SNAPSHOT and m.match_index >= progress.pending_snapshot:
            progress.become_replicate()
        committed = updated and self.maybe_commit()
        self.send_all(m.source)
        return committed

    # ------------------------------------------------------------------ time

    def tick(self) -> None:
        config = self._host.config
        for peer, progress in self.progress.items():
            if progress.state is ProgressState.SNAPSHOT:
                # Snapshots are big: resend only after a whole election timeout.
                progress.ticks_since_snapshot += 1
                if progress.ticks_since_snapshot >= config.election_ticks:
                    progress.become_probe()
                    self.send_append(peer)
        if self.transferee is not None:
            self._transfer_elapsed += 1
            if self._transfer_elapsed >= config.election_ticks:
                self.transferee = None  # the target did not take over in time
        self._heartbeat_elapsed += 1
        if self._heartbeat_elapsed >= config.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self.broadcast_heartbeat()

    def broadcast_heartbeat(self) -> None:
        commit_index = self._host.raft_log.commit_index
        self._heartbeat_round += 1
        for peer, progress in self.progress.items():
            self._outbox.append(Heartbeat(
                source=self._host.id, target=peer, term=self._host.term,
                leader_commit=min(progress.match_index, commit_index),
                round=self._heartbeat_round,
            ))

    def quorum_active(self) -> bool:
        """Has a majority of voters been heard from since the last check? Resets the marks."""
        voters = self._host.membership.voters
        active = sum(1 for voter in voters if voter == self._host.id
                     or (voter in self.progress and self.progress[voter].recent_active))
        for progress in self.progress.values():
            progress.recent_active = False
        return active >= len(voters) // 2 + 1

    # -------------------------------------------------------------- transfer

    def transfer(self, target: str) -> None:
        """Hand leadership to `target` once its log is complete."""
        self.transferee = target
        self._transfer_elapsed = 0
        if not self._maybe_finish_transfer(target):
            self.send_append(target)

    def _maybe_finish_transfer(self, peer: str) -> bool:
        if peer != self.transferee:
            return False
        if self.progress[peer].match_index < self._host.raft_log.last_index:
            return False
        self._outbox.append(TimeoutNow(source=self._host.id, target=peer, term=self._host.term))
        return True

    def most_up_to_date_voter(self) -> str | None:
        """A voter other than us whose log is complete, to hand over to."""
        last_index = self._host.raft_log.last_index
        voters = self._host.membership.voters
        complete = [peer for peer, progress in sorted(self.progress.items())
                    if peer in voters and progress.match_index == last_index]
        return complete[0] if complete else None
