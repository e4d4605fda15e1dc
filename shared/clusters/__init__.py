"""Named clusters (SkyPilot's `launch -c`, `exec`, `stop`/`start`/`down`, autostop), owned and named by users.

`states` (the cluster's and its jobs' states and their moves, as data), `operations` (what users do: the
API and the CLI call these), `provisioning` (`cluster_step`: one queue message of a cluster: the launch with
failover; start, stop and down are in `start_stop`; the autostop check), `agents` (what the clusters' node
agents ask and tell), `views` (the read side), `shells` (`skyless ssh`), `health` (the reconcile sweep's
part), `messages`, `names`, `stopping` (which clouds can stop). Behind them: `job_queue` and `queue_policy`
(the queue, FIFO with accelerator sharing), `autostop`, `facts` (a record read without I/O), `steps` (what
the cloud steps share), `tokens`. The table is shared/store/cluster_records.py.
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
