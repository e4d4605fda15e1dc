"""Which machine image a node boots: the task's `image_id`, or a Deep Learning AMI (GPU) / Ubuntu (CPU)
found by name in the region, newest first, cached per process (warm invocations look up nothing)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shared.clouds.errors import InvalidLaunchError, NoCapacityError

DLAMI_OWNER = "898082745236"  # Amazon's Deep Learning AMIs
CANONICAL_OWNER = "099720109477"  # Ubuntu

# (owner, name pattern) in order of preference; the first pattern with any image wins.
SEARCHES: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("gpu", "x86_64"): [
        (DLAMI_OWNER, "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"),
        (DLAMI_OWNER, "Deep Learning Base * (Ubuntu *"),
        (DLAMI_OWNER, "Deep Learning AMI*Ubuntu*"),
    ],
    ("gpu", "arm64"): [
        (DLAMI_OWNER, "Deep Learning ARM64 Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"),
    ],
    ("cpu", "x86_64"): [
        (CANONICAL_OWNER, "ubuntu/images/hvm-ssd*/ubuntu-jammy-22.04-amd64-server-*"),
        (CANONICAL_OWNER, "ubuntu/images/hvm-ssd*/ubuntu-*-amd64-server-*"),
    ],
    ("cpu", "arm64"): [
        (CANONICAL_OWNER, "ubuntu/images/hvm-ssd*/ubuntu-jammy-22.04-arm64-server-*"),
        (CANONICAL_OWNER, "ubuntu/images/hvm-ssd*/ubuntu-*-arm64-server-*"),
    ],
}
# NVIDIA families (p5, p4de, g6e, g5g, gr6) boot the DLAMI; Neuron/Gaudi (trn, inf, dl) need image_id.
NVIDIA_FAMILIES = ("p", "g", "gr")
GRAVITON = re.compile(r"^[a-z]+\d+[a-z]*g[a-z]*$")  # m7g, c7gn, r6gd, g5g, t4g, is4gen
DEFAULT_ROOT_DEVICE = "/dev/sda1"

_cache: dict[tuple[str, str], Image] = {}  # (region, image id or kind/arch) -> Image, for warm invocations


@dataclass(frozen=True)
class Image:
    image_id: str
    root_device: str
    name: str = ""


def family_of(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def is_accelerated(instance_type: str) -> bool:
    letters = re.match(r"[a-z]*", family_of(instance_type))
    return letters is not None and letters.group(0) in NVIDIA_FAMILIES


def architecture_of(instance_type: str) -> str:
    return "arm64" if GRAVITON.match(family_of(instance_type)) else "x86_64"


def requested_image(image_id: str | dict[str, str] | None, region: str) -> str | None:
    """The image the task asks for in this region (None: pick one). SkyPilot's forms are accepted:
    one id, `{region: id}`, and `skypilot:gpu-ubuntu-2204`-style tags (which mean "pick one")."""
    if isinstance(image_id, dict):
        if region not in image_id:
            raise NoCapacityError(f"image_id names no image for region {region}")
        image_id = image_id[region]
    if image_id is None or image_id.startswith("skypilot:"):
        return None
    if image_id.startswith("docker:"):
        return None  # the default image; the node agent runs the container on it
    return image_id


def find_image(ec2: Any, region: str, instance_type: str, image_id: str | None) -> Image:
    """The requested image (checked to exist) or the newest default one for the instance type."""
    if image_id is not None:
        key = (region, image_id)
        if key not in _cache:
            images = ec2.describe_images(ImageIds=[image_id])["Images"]
            if not images:
                raise InvalidLaunchError(f"InvalidAMIID.NotFound: no image {image_id} in {region}")
            _cache[key] = _image(images[0])
        return _cache[key]
    kind = "gpu" if is_accelerated(instance_type) else "cpu"
    arch = architecture_of(instance_type)
    key = (region, f"{kind}/{arch}")
    if key not in _cache:
        _cache[key] = _search(ec2, region, kind, arch)
    return _cache[key]


def _search(ec2: Any, region: str, kind: str, arch: str) -> Image:
    for owner, pattern in SEARCHES[(kind, arch)]:
        filters = [
            {"Name": "name", "Values": [pattern]},
            {"Name": "architecture", "Values": [arch]},
            {"Name": "state", "Values": ["available"]},
        ]
        images = ec2.describe_images(Owners=[owner], Filters=filters)["Images"]
        if images:
            newest = max(images, key=lambda i: (i.get("CreationDate", ""), i.get("Name", "")))
            return _image(newest)
    raise InvalidLaunchError(f"no {kind} {arch} image found in {region}; set resources.image_id")


def _image(raw: dict[str, Any]) -> Image:
    return Image(raw["ImageId"], raw.get("RootDeviceName") or DEFAULT_ROOT_DEVICE, raw.get("Name", ""))


def forget_images() -> None:
    """Drop the per-process cache (tests; a long-lived process that wants fresh images)."""
    _cache.clear()
