"""Buckets named in task files (SkyPilot's `file_mounts` storage), from submit to job end.

`access` is the one rule of what a task may read or write (never skyless's own bucket; only what the user
owns or was granted); `specs` reads which buckets a task names and how each reaches the node (pure);
`lifecycle` checks them at submit, creates them before the first launch, hands each node credentials for
exactly its buckets and deletes them at the end when skyless made them and they are not `persistent`;
`backends` (S3, R2, and the choice of backend per store), `gcs`, `azure_blob` and `registry` (who owns
which name) sit under it; `listing` is `skyless storage ls | delete`; `gravity` places and sizes the
buckets a job reads for the optimizer (through `bucket_places`, cached), and `storage_costs` what the
buckets skyless made cost to keep; `rclone` writes the mount and copy commands for real VMs.
"""

__all__ = ["access", "gravity", "lifecycle", "listing", "specs", "storage_costs"]
