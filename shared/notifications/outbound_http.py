"""HTTP calls to URLs a user gave us (Slack webhooks): https to public addresses only, pinned.

A user-given URL must not reach what only the control plane can reach (loopback, the VPC, the metadata
service). So: the host is resolved, every address it resolves to must be public, and the connection goes
to an address that was checked (the request names the IP; `Host` and TLS SNI name the host, and the
certificate is verified against the host), so a DNS answer that changes between check and connect is
never used. Redirects are not followed. The local runtime may allow loopback (`allow_loopback`) for its
own test webhooks; then plain http is accepted for loopback hosts only.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shared.errors import UserError

if TYPE_CHECKING:
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[IPAddress]]

NAT64 = ipaddress.ip_network("64:ff9b::/96")
METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class RefusedDestination(Exception):
    """A URL skyless will not call; the message says why without naming what the host resolved to."""


def address_problem(address: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why skyless will not connect to `address`, or None when it is a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is None and address.teredo:
            embedded = address.teredo[1]
        if embedded is not None:
            return address_problem(embedded, allow_loopback=allow_loopback)
    if address.is_loopback:
        return None if allow_loopback else "a loopback address"
    if address in METADATA:
        return "the cloud metadata service"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private or not address.is_global or address.is_reserved:
        return "a private or reserved address"
    return None


def resolve_addresses(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (an IP literal resolves to itself). Raises OSError when none."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: dict[IPAddress, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        found[ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])] = None
    return list(found)


@dataclass(frozen=True)
class Destination:
    url: httpx.URL
    host: str
    port: int


def parse_destination(url: str, *, allow_loopback: bool = False) -> Destination:
    """The URL's host and port if its form is acceptable (https, a host, no credentials in it)."""
    import httpx  # on use: the API and notify import this module, most of their calls post nothing

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise RefusedDestination("not a URL") from exc
    if parsed.scheme not in ("https", "http") or not parsed.host:
        raise RefusedDestination("must be an https:// URL with a host")
    if parsed.userinfo:
        raise RefusedDestination("must not carry a user name or password")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    destination = Destination(parsed, parsed.host, port)
    if parsed.scheme == "http":
        literal = _literal(parsed.host)
        loopback_name = parsed.host == "localhost" or parsed.host.endswith(".localhost")
        if not (allow_loopback and ((literal is not None and literal.is_loopback) or loopback_name)):
            raise RefusedDestination("must be https://")
    return destination


def checked_addresses(
    destination: Destination, *, allow_loopback: bool = False, resolve: Resolver | None = None
) -> list[IPAddress]:
    """Resolve the host and check every address; refuse when any one is not public.

    Raises RefusedDestination (never worth retrying) or OSError (the name did not resolve: may be transient).
    """
    addresses = (resolve or resolve_addresses)(destination.host, destination.port)
    if not addresses:
        raise OSError(f"{destination.host} resolved to no address")
    for address in addresses:
        problem = address_problem(address, allow_loopback=allow_loopback)
        if problem:
            raise RefusedDestination(f"the host resolves to {problem}")
    if destination.url.scheme == "http" and not all(a.is_loopback for a in addresses):
        raise RefusedDestination("must be https://")
    return addresses


def check_public_url(
    url: str, *, field: str, allow_loopback: bool = False, resolve: Resolver | None = None, hint: str = ""
) -> str:
    """What a user gives as a URL skyless will call later: refused now (a UserError naming `field`) when
    its form is wrong or its host resolves to a non-public address. A name that does not resolve now is
    accepted (it is checked again, and pinned, at every call)."""
    url = url.strip()
    try:
        destination = parse_destination(url, allow_loopback=allow_loopback)
        checked_addresses(destination, allow_loopback=allow_loopback, resolve=resolve)
    except RefusedDestination as exc:
        raise UserError(f"refused webhook URL: {exc}", field=field, hint=hint or None) from None
    except (OSError, UnicodeError):
        pass
    return url


class PinnedClient:
    """An httpx client whose requests go only to checked addresses of the URL's host.

    `post_json(url, payload)` answers the response (redirects are answers, never followed) or raises
    RefusedDestination, OSError (name not resolved) or httpx.HTTPError (network)."""

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        timeout: float = 10.0,
        verify: Any = True,
        resolve: Resolver | None = None,
    ) -> None:
        self.allow_loopback = allow_loopback
        self.resolve = resolve
        import httpx

        # trust_env=False: an environment proxy would connect to the host itself, unpinned.
        self._client = httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False, verify=verify)
        self._pins: dict[str, list[IPAddress]] = {}

    def __enter__(self) -> PinnedClient:
        return self

    def __exit__(self, *_: object) -> None:
        self._client.close()

    def addresses(self, url: str) -> tuple[Destination, list[IPAddress]]:
        destination = parse_destination(url, allow_loopback=self.allow_loopback)
        key = f"{destination.host}:{destination.port}"
        if key not in self._pins:
            self._pins[key] = checked_addresses(
                destination, allow_loopback=self.allow_loopback, resolve=self.resolve
            )
        return destination, self._pins[key]

    def post_json(self, url: str, payload: Any) -> httpx.Response:
        import httpx

        destination, addresses = self.addresses(url)
        host_header = destination.url.netloc.decode("ascii")
        extensions = {"sni_hostname": destination.host} if destination.url.scheme == "https" else {}
        last: httpx.HTTPError | None = None
        for address in addresses:
            pinned = destination.url.copy_with(host=str(address))
            try:
                return self._client.post(
                    pinned, json=payload, headers={"Host": host_header}, extensions=extensions
                )
            except httpx.ConnectError as exc:  # the next checked address, as a resolver's client would
                last = exc
        assert last is not None
        raise last


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
