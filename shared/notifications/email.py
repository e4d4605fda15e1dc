"""Email through SES (SendEmail, plain text). The sender is `SKYLESS_NOTIFY_FROM` (default below);
it must be a verified identity: create_stack verifies it locally; the SAM template, deployed."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from shared.aws.sessions import aws_client
from shared.config import Settings
from shared.config.channels import NotifyConfig
from shared.notifications.deliveries import Delivery
from shared.notifications.events import Notification

DEFAULT_SENDER = NotifyConfig.sender


def sender_address() -> str:
    return NotifyConfig.from_env().sender


def send_email(settings: Settings, address: str, notification: Notification) -> Delivery:
    """One SES send (the SDK retries throttling itself). Never raises for a refused send."""
    try:
        aws_client("ses", settings).send_email(
            Source=sender_address(),
            Destination={"ToAddresses": [address]},
            Message={
                "Subject": {"Data": notification.subject[:200], "Charset": "UTF-8"},
                "Body": {"Text": {"Data": notification.text(), "Charset": "UTF-8"}},
            },
        )
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "error")
        return Delivery(
            "email", False, 1, address, f"SES {code}: {error.response['Error'].get('Message', '')}"
        )
    except BotoCoreError as error:
        return Delivery("email", False, 1, address, f"SES unreachable ({type(error).__name__})")
    return Delivery("email", True, 1, address)
