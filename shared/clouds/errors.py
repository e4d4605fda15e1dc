"""What a launch can fail with, and so what the provisioner does next."""

from __future__ import annotations


class CloudError(Exception):
    """Base of the taxonomy. `message` is the cloud's own words, kept for the job's timeline."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NoCapacityError(CloudError):
    """No capacity in that zone (or region): block it and try the next candidate."""


class QuotaError(CloudError):
    """Over quota: block the region for the instance family."""


class CloudAuthError(CloudError):
    """Credentials missing or refused: disable the cloud for this job."""


class TransientCloudError(CloudError):
    """Throttling, timeouts, 5xx: retry the same candidate later."""


class InvalidLaunchError(CloudError):
    """The request itself is wrong (bad image, bad instance type): the job fails with the cloud's message."""
