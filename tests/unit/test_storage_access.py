"""The storage rule (shared/storage/access.py) as pure code over generated spellings, grants and prefixes:
skyless's bucket is refused however a URL spells it, a grant never reaches past its prefix, a read-only
grant never lets a task write, and an owner's bucket is no one else's."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.errors import UserError
from shared.storage.access import BucketUse, StorageWalls, names_skyless_bucket, reach
from shared.store.tenancy import Grant

BUCKET = "acme-artifacts"
WALLS = StorageWalls(BUCKET, "http://127.0.0.1:5566")


@dataclass
class Facts:
    owners: dict[str, str] = field(default_factory=dict)
    grants: list[Grant] = field(default_factory=list)
    teams: dict[str, set[str]] = field(default_factory=dict)

    def owner_of(self, bucket: str) -> str | None:
        return self.owners.get(bucket)

    def grants_on(self, bucket: str) -> list[Grant]:
        return [g for g in self.grants if g.bucket == bucket]

    def teams_of(self, user_id: str) -> set[str]:
        return self.teams.get(user_id, set())


def _spelled(name: str, draw_case: list[bool], encode: list[bool]) -> str:
    """`name` with some letters upper-cased and some characters percent-encoded."""
    out = []
    for char, upper, quoted in zip(name, draw_case, encode, strict=False):
        char = char.upper() if upper else char
        out.append(f"%{ord(char):02X}" if quoted else char)
    return "".join(out) + name[len(out) :]


FORMS = (
    "s3://{b}",
    "s3://{b}/",
    "s3://{b}/runs/j/secrets.json",
    "gs://{b}/x",
    "r2://{b}",
    "https://{b}.s3.amazonaws.com/x",
    "https://{b}.s3.eu-west-1.amazonaws.com/x?X-Amz-Signature=ab",
    "https://s3.amazonaws.com/{b}/x",
    "https://s3.eu-west-1.amazonaws.com//{b}/./x",
    "http://{b}.localhost/x",
)


@given(
    form=st.sampled_from(FORMS),
    case=st.lists(st.booleans(), min_size=len(BUCKET), max_size=len(BUCKET)),
    encode=st.lists(st.booleans(), min_size=len(BUCKET), max_size=len(BUCKET)),
)
def test_every_spelling_of_skylesss_bucket_is_recognised(
    form: str, case: list[bool], encode: list[bool]
) -> None:
    spelled = _spelled(BUCKET, case, encode)
    if form.startswith("https://{b}.") or form.startswith("http://{b}."):
        spelled = _spelled(BUCKET, case, [False] * len(BUCKET))  # a host is not percent-decoded by clients
    assert names_skyless_bucket(form.format(b=spelled), WALLS)


@pytest.mark.parametrize(
    "source",
    ["s3://acme-artifacts-public/x", "https://example.com/acme-artifacts-not", "./acme-artifacts",
     "https://s3.amazonaws.com/other/acme-artifacts/x", "http://127.0.0.1:8080/other/x"],
)  # fmt: skip
def test_names_that_only_look_alike_are_other_buckets(source: str) -> None:
    assert not names_skyless_bucket(source, WALLS)


@pytest.mark.parametrize(
    "source",
    ["http://127.0.0.1:5566/any/x", "http://localhost:5566/", "http://127.1:5566/b", "http://[::1]:5566/b",
     "http://0.0.0.0:5566/b", "http://2130706433:5566/b"],
)  # fmt: skip
def test_the_storage_endpoint_itself_is_refused_in_every_loopback_form(source: str) -> None:
    assert names_skyless_bucket(source, WALLS)


prefixes = st.lists(st.sampled_from(["a", "b", "ab", "a.b"]), min_size=0, max_size=3).map("/".join)


@given(
    granted=prefixes, mounted=prefixes, write=st.booleans(), grant_writes=st.booleans(), team=st.booleans()
)
def test_a_grant_reaches_its_prefix_and_below_and_writes_only_when_it_says(
    granted: str, mounted: str, write: bool, grant_writes: bool, team: bool
) -> None:
    grantee = "team:vision" if team else "user:u-1"
    facts = Facts(grants=[Grant("data", grantee, granted, grant_writes)], teams={"u-1": {"vision"}})
    use = BucketUse("file_mounts./d", "data", mounted, write, managed=False)
    inside = not granted or mounted == granted or mounted.startswith(granted + "/")
    if not inside or (write and not grant_writes):
        with pytest.raises(UserError) as caught:
            reach(use, user_id="u-1", facts=facts, walls=WALLS)
        assert (
            caught.value.field == "file_mounts./d" and "skyless admin buckets grant data" in caught.value.hint
        )
        return
    allowed = reach(use, user_id="u-1", facts=facts, walls=WALLS)
    assert allowed.read_only == (not write) and allowed.via == grantee
    with pytest.raises(UserError):  # a user in no team, with no grant: refused the same use
        reach(use, user_id="u-2", facts=facts, walls=WALLS)


def test_an_owners_bucket_is_theirs_alone_and_a_name_nobody_holds_is_new() -> None:
    facts = Facts(owners={"ckpt": "u-1"})
    mine = BucketUse("file_mounts./c", "ckpt", "", True, managed=True)
    assert reach(mine, user_id="u-1", facts=facts, walls=WALLS).via == "owner"
    with pytest.raises(UserError, match="belongs to another skyless user"):
        reach(mine, user_id="u-2", facts=facts, walls=WALLS)
    fresh = BucketUse("file_mounts./c", "fresh-name", "", True, managed=True)
    assert reach(fresh, user_id="u-2", facts=facts, walls=WALLS).via == "new"
    existing = BucketUse("file_mounts./c", "fresh-name", "", False, managed=False)
    with pytest.raises(UserError, match="not yours and not granted"):
        reach(existing, user_id="u-2", facts=facts, walls=WALLS)


def test_the_deployments_bucket_pattern_bounds_every_use() -> None:
    walls = StorageWalls(BUCKET, None, ("acme-ml-*",))
    facts = Facts(owners={"other-bucket": "u-1"})
    with pytest.raises(UserError, match="only buckets named acme-ml-"):
        reach(
            BucketUse("file_mounts./c", "other-bucket", "", False, False),
            user_id="u-1",
            facts=facts,
            walls=walls,
        )
    ok = BucketUse("file_mounts./c", "acme-ml-ckpt", "", True, True)
    assert reach(ok, user_id="u-1", facts=facts, walls=walls).via == "new"
