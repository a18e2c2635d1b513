"""Queue replication (DESIGN.md section 6): pure cores and the follower's storage.

- `EpochHistory`: the first offset of each leader epoch, for truncation on divergence;
- `ReplicationLeader`: the leader's view of its followers, the high watermark and the
  in-sync set it wants;
- `fetch`: what a follower asks and what the leader answers;
- `FollowerReplica`: a follower's log, cursor and epoch history on disk;
- `failover`: which replica the controller promotes.
"""
