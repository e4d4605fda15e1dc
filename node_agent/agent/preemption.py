"""Preemption notices from each cloud's metadata service (AWS spot/instance-action, GCP
instance/preempted, Azure Scheduled Events), each a watcher the agent polls."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

from node_agent.agent.api import http_request, log

METADATA_POLL_SECONDS = float(os.environ.get("SKYLESS_METADATA_POLL_SECONDS", "5"))
METADATA_WAIT = float(os.environ.get("SKYLESS_METADATA_WAIT_SECONDS", "60"))  # GCP long poll


def metadata_get(
    url: str, headers: dict[str, str], timeout: float = 2.0
) -> tuple[int, bytes, dict[str, str]]:
    """One metadata-service GET: (status, body, headers with lower-case names); status 0 when the service
    cannot be reached."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, error.read(), {k.lower(): v for k, v in error.headers.items()}
    except OSError:
        return 0, b"", {}


class MetadataWatcher:
    """A cloud's metadata-service preemption notice. `check()` answers the notice or None and may block
    (a long poll); `pause()` is how long to wait before the next check; `acknowledge()` tells the cloud
    the node has let go (called once the task has stopped)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")

    def check(self) -> str | None:
        raise NotImplementedError

    def pause(self) -> float:
        return METADATA_POLL_SECONDS

    def acknowledge(self) -> None:
        return None


class AwsSpotWatcher(MetadataWatcher):
    """AWS IMDSv2 `spot/instance-action`: 404 normally, a JSON notice two minutes before the reclaim."""

    def check(self) -> str | None:
        token_request = urllib.request.Request(
            self.base + "/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"},
        )
        headers = {}
        try:
            with urllib.request.urlopen(token_request, timeout=1.0) as response:
                headers["X-aws-ec2-metadata-token"] = response.read().decode()
        except OSError:
            pass
        status, body, _ = metadata_get(self.base + "/latest/meta-data/spot/instance-action", headers)
        return body.decode("utf-8", "replace") if status == 200 else None


class GcpPreemptedWatcher(MetadataWatcher):
    """GCP `instance/preempted` (FALSE, then TRUE about 30 s before the VM stops), read once, then watched
    with `?wait_for_change=true&last_etag=`: the metadata server answers as soon as the value changes, so a
    notice is seen at once rather than at the next poll."""

    HEADERS = {"Metadata-Flavor": "Google"}

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self.etag: str | None = None
        self.again_now = False

    def check(self) -> str | None:
        url = self.base + "/computeMetadata/v1/instance/preempted"
        waiting = self.etag is not None
        if waiting:
            query = {
                "wait_for_change": "true",
                "last_etag": self.etag,
                "timeout_sec": str(int(METADATA_WAIT)),
            }
            url += "?" + urllib.parse.urlencode(query)
        started = time.monotonic()
        status, body, headers = metadata_get(
            url, self.HEADERS, timeout=METADATA_WAIT + 10 if waiting else 2.0
        )
        held = time.monotonic() - started >= 1.0
        if status != 200:
            self.again_now = False
            return None
        self.etag = headers.get("etag") or self.etag
        # Wait again at once after the first read or a held long poll; not after an answer that came at
        # once to a long poll (a server that ignores wait_for_change): that would spin.
        self.again_now = self.etag is not None and (not waiting or held)
        return "instance/preempted=TRUE" if body.strip().upper() == b"TRUE" else None

    def pause(self) -> float:
        return 0.0 if self.again_now else METADATA_POLL_SECONDS


class AzureScheduledEventsWatcher(MetadataWatcher):
    """Azure IMDS Scheduled Events: a `Preempt` event naming this VM (a Spot eviction, at least 30 s ahead).
    Once the task has stopped, the event is approved (POST `StartRequests`), which lets Azure go ahead now."""

    URL = "/metadata/scheduledevents?api-version=2020-07-01"
    HEADERS = {"Metadata": "true"}

    def __init__(self, base: str, vm_name: str) -> None:
        super().__init__(base)
        self.vm_name = vm_name
        self.event_id: str | None = None

    def check(self) -> str | None:
        status, body, _ = metadata_get(self.base + self.URL, self.HEADERS)
        if status != 200:
            return None
        try:
            events = json.loads(body.decode("utf-8")).get("Events") or []
        except (ValueError, AttributeError):
            return None
        for event in events:
            resources = event.get("Resources") or []
            ours = not resources or self.vm_name in resources
            if event.get("EventType") == "Preempt" and ours:
                self.event_id = str(event.get("EventId") or "") or None
                return json.dumps(event)
        return None

    def acknowledge(self) -> None:
        if self.event_id is None:
            return
        body = json.dumps({"StartRequests": [{"EventId": self.event_id}]}).encode()
        headers = {**self.HEADERS, "Content-Type": "application/json"}
        try:
            status, _ = http_request(
                self.base + self.URL, method="POST", body=body, headers=headers, timeout=5
            )
        except OSError as error:
            log(f"could not approve scheduled event {self.event_id}: {error}")
            return
        log(f"approved scheduled event {self.event_id}: HTTP {status}")


METADATA_URLS = {
    "aws": ("SKYLESS_AWS_METADATA_URL", "http://169.254.169.254"),
    "gcp": ("SKYLESS_GCP_METADATA_URL", "http://metadata.google.internal"),
    "azure": ("SKYLESS_AZURE_METADATA_URL", "http://169.254.169.254"),
}


def metadata_watcher(cloud: str, env: dict[str, str]) -> MetadataWatcher | None:
    """The preemption watcher for this cloud's metadata service (its base URL from the environment, so
    tests can point it at a local server), or None (the local cloud, or clouds without one)."""
    if cloud not in METADATA_URLS:
        return None
    env_name, default = METADATA_URLS[cloud]
    base = env.get(env_name) or default
    if cloud == "aws":
        return AwsSpotWatcher(base)
    if cloud == "gcp":
        return GcpPreemptedWatcher(base)
    return AzureScheduledEventsWatcher(base, env.get("SKYLESS_INSTANCE_ID", ""))
