"""Running a broker node as a member of a cluster (DESIGN.md section 6).

`ClusterNode` (cluster_node.py) wires the pieces: the cluster transport, the
Raft-replicated metadata, the controller's node liveness, queue placement,
and any-node access to queues led elsewhere (`RemoteQueue` on the node a
client is connected to, `QueueHost` on the queue's leader node).
"""
