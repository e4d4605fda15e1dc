"""What every bucket backend raises (S3 and R2 in backends, GCS and Azure Blob in their own modules)."""


class StoreError(Exception):
    """A bucket operation the store refused (the name is taken, no access, no such bucket)."""
