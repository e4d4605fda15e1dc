"""EC2 error codes mapped onto the provider taxonomy (shared/clouds/errors.py): one table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from shared.clouds.errors import (
    CloudAuthError,
    CloudError,
    InvalidLaunchError,
    NoCapacityError,
    QuotaError,
    TransientCloudError,
)

ERROR_CODES: dict[str, type[CloudError]] = {
    # No room in this zone right now: block the zone, try the next candidate.
    "InsufficientInstanceCapacity": NoCapacityError,
    "InsufficientCapacity": NoCapacityError,
    "InsufficientHostCapacity": NoCapacityError,
    "InsufficientReservedInstanceCapacity": NoCapacityError,
    "ReservationCapacityExceeded": NoCapacityError,  # a targeted capacity reservation is full
    "InsufficientFreeAddressesInSubnet": NoCapacityError,
    "SpotMaxPriceTooLow": NoCapacityError,
    # "Your requested instance type is not supported in your requested Availability Zone": this zone
    # cannot serve the candidate, other zones may.
    "Unsupported": NoCapacityError,
    # Account limits: block the region for the instance family.
    "MaxSpotInstanceCountExceeded": QuotaError,
    "VcpuLimitExceeded": QuotaError,
    "InstanceLimitExceeded": QuotaError,
    "VolumeLimitExceeded": QuotaError,
    "MaxIOPSLimitExceeded": QuotaError,
    "SecurityGroupLimitExceeded": QuotaError,
    "RulesPerSecurityGroupLimitExceeded": QuotaError,
    "PendingVerification": QuotaError,  # a new account's region is not open yet
    "OptInRequired": QuotaError,  # region not enabled for the account
    # Credentials missing, wrong or not allowed: disable the cloud.
    "UnauthorizedOperation": CloudAuthError,
    "AuthFailure": CloudAuthError,
    "InvalidClientTokenId": CloudAuthError,
    "SignatureDoesNotMatch": CloudAuthError,
    "ExpiredToken": CloudAuthError,
    "RequestExpired": CloudAuthError,
    "UnrecognizedClientException": CloudAuthError,
    "AccessDenied": CloudAuthError,
    "AccessDeniedException": CloudAuthError,
    "Blocked": CloudAuthError,
    # Throttling and the service's own trouble: retry the same candidate later.
    "RequestLimitExceeded": TransientCloudError,
    "Throttling": TransientCloudError,
    "ThrottlingException": TransientCloudError,
    "InternalError": TransientCloudError,
    "InternalFailure": TransientCloudError,
    "ServiceUnavailable": TransientCloudError,
    "Unavailable": TransientCloudError,
    "RequestTimeout": TransientCloudError,
    "IdempotentInstanceTerminated": TransientCloudError,
    # The request is wrong: the job fails with EC2's message.
    "InvalidParameterCombination": InvalidLaunchError,
    "InvalidParameterValue": InvalidLaunchError,
    "InvalidParameter": InvalidLaunchError,
    "MissingParameter": InvalidLaunchError,
    "InvalidBlockDeviceMapping": InvalidLaunchError,
    "InvalidUserData.Malformed": InvalidLaunchError,
    "IdempotentParameterMismatch": InvalidLaunchError,
}
ERROR_PREFIXES: dict[str, type[CloudError]] = {
    "InvalidAMIID.": InvalidLaunchError,  # NotFound, Malformed, Unavailable
    "InvalidInstanceType": InvalidLaunchError,
    "InvalidIamInstanceProfile.": InvalidLaunchError,
}


def error_class_for(code: str, http_status: int | None = None) -> type[CloudError]:
    """The taxonomy class of an EC2 error code; unknown ones by HTTP status (5xx transient, else invalid)."""
    if code in ERROR_CODES:
        return ERROR_CODES[code]
    for prefix, kind in ERROR_PREFIXES.items():
        if code.startswith(prefix):
            return kind
    if http_status is not None and http_status >= 500:
        return TransientCloudError
    return InvalidLaunchError


def cloud_error_from(error: Exception) -> CloudError:
    """A boto3/botocore exception as a CloudError carrying EC2's own words."""
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        code = str(details.get("Code", "Unknown"))
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = f"{code}: {details.get('Message') or error}"
        return error_class_for(code, status)(message)
    if isinstance(error, NoCredentialsError | PartialCredentialsError | NoRegionError):
        return CloudAuthError(f"AWS credentials: {error}")
    if isinstance(error, BotoConnectionError):
        return TransientCloudError(f"cannot reach EC2: {error}")
    return TransientCloudError(f"EC2 call failed: {error}")


@contextmanager
def ec2_errors() -> Iterator[None]:
    """Translate what boto3 raises inside the block into the taxonomy."""
    try:
        yield
    except (ClientError, BotoCoreError) as error:
        raise cloud_error_from(error) from error


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
