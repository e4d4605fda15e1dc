"""Task files uploaded to the bucket under tasks/: `intake` turns S3 events into jobs, once per
bucket/key/ETag, and reports a rejected file beside it (`<key>.error.json`).
"""

__all__ = ["intake"]
