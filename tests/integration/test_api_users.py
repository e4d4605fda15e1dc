"""Users and API keys against moto's DynamoDB: keys stored hashed, found by key, revocable."""

from __future__ import annotations

import hashlib

import boto3
import pytest

from shared.api.auth import AuthError, authenticate_user, bearer_token
from shared.config import Settings
from shared.store.users import create_user, find_user, main, revoke_key


def _stored_items(settings: Settings) -> list[dict]:
    dynamodb = boto3.client("dynamodb", region_name=settings.region, endpoint_url=settings.endpoint_url)
    return dynamodb.scan(TableName=settings.table_name("users"))["Items"]


def test_create_user_stores_only_the_sha256_of_the_key(stack: Settings) -> None:
    key = create_user("alice", stack)

    items = _stored_items(stack)
    assert len(items) == 1
    assert items[0]["key_hash"]["S"] == hashlib.sha256(key.encode()).hexdigest()
    assert key not in repr(items)


def test_find_user_answers_the_keys_owner_and_none_for_an_unknown_key(stack: Settings) -> None:
    alice_key = create_user("alice", stack)
    bob_key = create_user("bob", stack)

    alice, bob = find_user(alice_key, stack), find_user(bob_key, stack)
    assert alice is not None and alice.name == "alice"
    assert bob is not None and bob.name == "bob"
    assert alice.user_id != bob.user_id
    assert find_user(alice_key + "x", stack) is None


def test_a_second_key_for_the_same_user_id_finds_the_same_user(stack: Settings) -> None:
    first = create_user("alice", stack)
    alice = find_user(first, stack)
    assert alice is not None
    second = create_user("alice", stack, user_id=alice.user_id)

    assert second != first
    assert find_user(second, stack) == alice


def test_a_revoked_key_no_longer_authenticates(stack: Settings) -> None:
    key = create_user("alice", stack)

    assert revoke_key(key, stack) is True
    assert revoke_key(key, stack) is False
    with pytest.raises(AuthError):
        authenticate_user({"authorization": f"Bearer {key}"}, stack)


def test_authenticate_user_accepts_any_case_of_the_bearer_scheme(stack: Settings) -> None:
    key = create_user("alice", stack)

    user = authenticate_user({"Authorization": f"bearer  {key} "}, stack)
    assert user.name == "alice"


@pytest.mark.parametrize("header", ["", "Bearer", "Bearer ", "Basic abc", "Token xyz", "Bearer " + "x" * 600])
def test_malformed_authorization_headers_are_auth_errors(header: str) -> None:
    with pytest.raises(AuthError) as caught:
        bearer_token({"authorization": header})
    assert caught.value.field == "Authorization"


def test_admin_entry_point_creates_a_user_whose_key_works(
    stack: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["create", "carol"]) == 0
    key = capsys.readouterr().out.strip()

    user = find_user(key, Settings.from_env())
    assert user is not None and user.name == "carol"
    assert main(["revoke", key]) == 0
    assert find_user(key, stack) is None
