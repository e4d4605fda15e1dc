"""The deployment's contracts set by an admin through the real API (`skyless admin contracts set FILE`, typed
as a user types it, over HTTP to the Chalice app on moto's server), no SKYLESS_CONTRACTS_FILE anywhere: a
team member's `launch --dryrun` and submitted job are then planned into their team's reservation at $0, a
user of another team never is and never reads that team's part; a non-admin cannot set or clear them (403);
a bad file is refused with the file name the admin gave and the key; every change is in the audit log once."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from cli.main import app as cli
from shared.config import Settings
from shared.config.env_names import ENV_CONTRACTS_FILE
from shared.errors import ConflictError
from shared.jobs.planning import plan_of
from shared.jobs.submission import SubmitJob, submit_job
from shared.store import tenancy
from shared.store.audit import read_audit
from shared.store.contract_records import (
    CONTRACTS_KEY,
    CONTRACTS_PARTITION,
    DynamoContractRecords,
    contracts_model,
)
from shared.store.users import create_user, find_user
from shared.wiring import wiring_for

TASK = "name: serve\nnum_nodes: 2\nresources:\n  instance_type: m6i.large\nrun: python serve.py\n"


def reservation(ident: str, zone: str, count: int = 4) -> dict[str, object]:
    return {"id": ident, "cloud": "aws", "zone": zone, "instance_type": "m6i.large", "count": count}


CONTRACTS = {
    "contracts": {"discounts": [{"cloud": "aws", "on_demand": 10}]},
    "teams": {
        "ml": {"contracts": {"reservations": [reservation("cr-ml", "us-east-1b")]}},
        "cv": {"contracts": {"reservations": [reservation("cr-cv", "us-east-1c")]}},
    },
}


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "220"})
    return result.exit_code, result.output


@pytest.fixture
def people(stack: Settings, cli_api: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """CLI flags of an admin, of `member` (team ml) and of `other` (team cv)."""
    monkeypatch.delenv(ENV_CONTRACTS_FILE, raising=False)
    url = cli_api[:2]
    flags = {"admin": [*url, "--api-key", create_user("root", stack, admin=True)], "member": cli_api,
             "other": [*url, "--api-key", create_user("bob", stack)]}  # fmt: skip
    for who, team in (("member", "ml"), ("other", "cv")):
        user = find_user(flags[who][3], stack)
        assert user is not None
        assert tenancy.create_team(stack, team, by="test")
        assert tenancy.add_member(stack, team, user.user_id, by="test")
    return flags


@pytest.fixture
def contracts_file(tmp_path: Path) -> Path:
    path = tmp_path / "contracts.yaml"
    path.write_text("# negotiated 2026-11\n" + yaml.safe_dump(CONTRACTS))
    return path


def test_contracts_an_admin_sets_plan_a_members_launch_into_their_teams_reservation(
    stack: Settings, people: dict[str, list[str]], contracts_file: Path, tmp_path: Path
) -> None:
    code, out = run("admin", "contracts", "set", str(contracts_file), *people["admin"])
    assert code == 0, out
    assert f"Contracts version 1 from {contracts_file} set by u-" in out
    task = tmp_path / "serve.yaml"
    task.write_text(TASK)
    code, out = run("launch", str(task), "--dryrun", "-y", *people["member"])
    assert code == 0, out
    assert "note: task 'serve': reserved: 4 of 4 free in cr-ml (aws m6i.large in us-east-1b)" in out
    assert "Estimated cost: $0.00. Dry run" in out
    code, out = run("launch", str(task), "--dryrun", "-y", *people["other"])
    assert "cr-ml" not in out and "reserved: 4 of 4 free in cr-cv" in out

    member = find_user(people["member"][3], stack)
    assert member is not None
    wiring = wiring_for(stack)
    job = submit_job(wiring, SubmitJob.from_text(owner=member.user_id, task_text=TASK, filename="serve.yaml"))
    stored = wiring.store.get(job.job_id)
    assert stored is not None
    plan = plan_of(stored)
    assert plan is not None
    chosen = plan.tasks[0].chosen
    assert (chosen.reservation, chosen.zone, chosen.hourly_price) == ("cr-ml", "us-east-1b", 0)
    assert {c.reservation for c in plan.tasks[0].candidates} <= {None, "cr-ml"}

    actions = [(e.action, e.target, e.detail.get("version")) for e in read_audit(stack)]
    assert actions[0] == ("contracts.set", str(contracts_file), 1)


def test_setting_the_same_file_twice_is_one_version_and_one_audit_entry_and_clear_returns_to_list_price(
    stack: Settings, people: dict[str, list[str]], contracts_file: Path, tmp_path: Path
) -> None:
    for _ in range(2):  # a retried request
        assert run("admin", "contracts", "set", str(contracts_file), *people["admin"])[0] == 0
    item = contracts_model(stack).get(CONTRACTS_PARTITION, CONTRACTS_KEY)
    assert int(item.version) == 1
    code, out = run("admin", "contracts", "clear", *people["admin"])
    assert code == 0 and "Contracts cleared (version 2)" in out, out
    task = tmp_path / "serve.yaml"
    task.write_text(TASK)
    code, out = run("launch", str(task), "--dryrun", "-y", *people["member"])
    assert code == 0 and "cr-ml" not in out and "Estimated cost: $0.00" not in out, out
    assert [e.action for e in read_audit(stack)][:2] == ["contracts.clear", "contracts.set"]
    assert [e.action for e in read_audit(stack)].count("contracts.set") == 1


def test_a_non_admin_cannot_set_or_clear_and_reads_only_their_teams_part(
    stack: Settings, people: dict[str, list[str]], contracts_file: Path
) -> None:
    code, out = run("admin", "contracts", "set", str(contracts_file), *people["member"])
    assert code == 2 and "an admin key is needed" in out, out
    url, key = people["member"][1], people["member"][3]
    body = {"file": "mine.yaml", "text": contracts_file.read_text()}
    auth = {"Authorization": f"Bearer {key}"}
    assert httpx.put(f"{url}/admin/contracts", json=body, headers=auth).status_code == 403
    assert httpx.delete(f"{url}/admin/contracts", headers=auth).status_code == 403
    assert run("admin", "contracts", "set", str(contracts_file), *people["admin"])[0] == 0
    assert run("admin", "contracts", "clear", *people["other"])[0] == 2

    code, out = run("admin", "contracts", "show", "--json", *people["other"])
    assert code == 0, out
    shown = json.loads(out)
    assert shown["teams"] == ["cv"] and shown["set_by"] is None
    assert (
        "cr-cv" in shown["text"]
        and "cr-ml" not in shown["text"]
        and "ml" not in yaml.safe_load(shown["text"])["teams"]
    )
    assert yaml.safe_load(shown["text"])["contracts"] == CONTRACTS["contracts"]  # everyone's part
    admin = json.loads(run("admin", "contracts", "show", "--json", *people["admin"])[1])
    assert admin["text"] == contracts_file.read_text() and admin["teams"] == ["cv", "ml"]
    assert wiring_for(stack).contracts.get().version == 1  # type: ignore[union-attr]  # nothing changed


def test_a_bad_contracts_file_names_the_file_and_the_key_and_stores_nothing(
    stack: Settings, people: dict[str, list[str]], tmp_path: Path
) -> None:
    bad = tmp_path / "deal.yaml"
    team = {"contracts": {"reservations": [reservation("cr-ml", "us-east-1b", count=0)]}}
    bad.write_text(yaml.safe_dump({"teams": {"ml": team}}))
    code, out = run("admin", "contracts", "set", str(bad), *people["admin"])
    assert code == 2, out
    assert f"{bad}:6: teams.ml.contracts.reservations[0].count: must be a whole number of nodes" in out
    assert "Traceback" not in out
    bad.write_text("contracts:\n  discounts: [\n")
    code, out = run("admin", "contracts", "set", str(bad), *people["admin"])
    assert code == 2 and f"{bad}:3: invalid YAML" in out, out
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 9)]
    bad.write_text("\n".join(laughs) + "\n")  # a billion laughs: 10^9 values once expanded
    code, out = run("admin", "contracts", "set", str(bad), *people["admin"])
    assert code == 2 and str(bad) in out and "more than" in out and "Traceback" not in out, out
    big = "contracts: {}\n" + "# padding\n" * 7000  # over 64 KB
    bad.write_text(big)
    code, out = run("admin", "contracts", "set", str(bad), *people["admin"])
    assert code == 2 and f"{bad}: is {len(big)} bytes, over the 65536" in out, out
    url, key = people["admin"][1], people["admin"][3]
    answer = httpx.put(f"{url}/admin/contracts", json={"file": "big.yaml", "text": big},
                       headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    assert answer.status_code == 422 and answer.json()["field"] == "text", answer.text
    assert wiring_for(stack).contracts.get() is None


def test_two_admins_setting_over_the_same_version_the_second_is_refused_on_dynamodb(stack: Settings) -> None:
    records = DynamoContractRecords(stack)
    first = records.put("contracts: {}\n", "a.yaml", "u-a", after=0)
    with pytest.raises(ConflictError):
        records.put("contracts: {}\n", "b.yaml", "u-b", after=0)  # read before the first was stored
    assert records.put("contracts: {}\n", "b.yaml", "u-b", after=first.version).version == 2
    with pytest.raises(ConflictError):
        records.put("contracts: {}\n", "c.yaml", "u-c", after=1)
    stored = records.get()
    assert stored is not None and (stored.version, stored.file) == (2, "b.yaml")
