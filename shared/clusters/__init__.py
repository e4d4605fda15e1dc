"""Named clusters (SkyPilot's `launch -c`, `exec`, `stop`/`start`/`down`, autostop), owned and named by users.

`states` (the cluster's and its jobs' states and their moves, as data), `operations` (what users do: the API
and the CLI call these), `provisioning` (`cluster_step`: one queue message of a cluster: launch with
failover, start, stop, down, the autostop check), `agents` (what the clusters' node agents ask and tell),
`views` (the read side), `health` (the reconcile sweep's part), `messages`, `names`. Behind them: `job_queue`
and `queue_policy` (the queue, FIFO with accelerator sharing), `autostop`, `stopping` (which clouds can stop),
`facts` (a record read without I/O), `tokens`. The table is shared/store/cluster_records.py.
"""

__all__ = [
    "agents",
    "health",
    "messages",
    "names",
    "operations",
    "provisioning",
    "shells",
    "states",
    "stopping",
    "views",
]
