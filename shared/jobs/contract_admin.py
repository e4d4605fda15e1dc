"""Setting, clearing and showing the deployment's contracts (`skyless admin contracts set|clear|show`).

`set` checks the text with the parser plans use (errors name the file the admin gave and the key), stores
it at the next version and appends `contracts.set` to the audit log; the same text and file sent again (a
retried request) is answered as stored, with no new version and no second entry. `clear` stores an empty
version; plans then use the operator's file (`SKYLESS_CONTRACTS_FILE`) where one is set, else list price.

Who sees what: an admin sees the stored text as it was sent; any other user sees the deployment-wide part and
the parts of the teams they belong to, never another team's (a team's reservations and prices are its own).

Crash window: the change is stored before its audit entry is written (as shared/tenants/admin.py does): a
process that dies between the two leaves a version without its entry, never an entry without its version.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import yaml

from shared.errors import ForbiddenError, UserError
from shared.jobs.contract_use import contracts_values, parse_contracts, remember_stored, stored_contracts
from shared.store import tenancy
from shared.store.audit import append_audit
from shared.store.contract_records import StoredContracts
from shared.store.users import User
from shared.wiring import Wiring

MAX_CONTRACTS_BYTES = 64 * 1024  # well inside a DynamoDB item (400 KB); a contracts file is a few KB
MAX_FILE_NAME_CHARS = 256


@dataclass(frozen=True)
class ContractsShown:
    version: int  # 0: none stored
    file: str
    text: str  # "" when there are none; a non-admin's part only
    teams: list[str]  # the teams whose part `text` holds
    set_by: str | None  # admins only
    set_at: float | None


def _admin(caller: User) -> str:
    if not caller.admin:
        raise ForbiddenError("an admin key is needed", field="Authorization",
                             hint="an admin sets the deployment's contracts")  # fmt: skip
    return caller.user_id


def _as_stored(stored: StoredContracts | None) -> ContractsShown:
    if stored is None:
        return ContractsShown(0, "", "", [], None, None)
    return ContractsShown(stored.version, stored.file, stored.text, [], stored.set_by, stored.set_at)


def set_contracts(wiring: Wiring, caller: User, *, file: str, text: str) -> ContractsShown:
    """Store `text` (an admin's key only) and answer what is stored."""
    actor = _admin(caller)
    file = file.strip() or "contracts.yaml"
    if len(file) > MAX_FILE_NAME_CHARS or not file.isprintable():
        raise UserError(f"must be a printable name of at most {MAX_FILE_NAME_CHARS} characters", field="file")
    size = len(text.encode("utf-8"))
    if size > MAX_CONTRACTS_BYTES:
        raise UserError(f"is {size} bytes, over the {MAX_CONTRACTS_BYTES} a deployment's contracts may be",
                        file=file)  # fmt: skip
    if not text.strip():
        raise UserError("is empty", file=file, hint="to remove them: `skyless admin contracts clear`")
    declared = parse_contracts(text, file)
    current = wiring.contracts.get()
    if current is not None and (current.text, current.file) == (text, file):
        remember_stored(wiring, current)
        return _as_stored(current)
    stored = wiring.contracts.put(text, file, actor, after=current.version if current else 0)
    remember_stored(wiring, stored)
    everyone = declared.every_reservation()
    append_audit(wiring.settings, actor=actor, action="contracts.set", target=file, detail={
        "version": stored.version, "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "discounts": len(everyone.discounts), "reservations": len(everyone.reservations),
        "teams": sorted(declared.teams),
    })  # fmt: skip
    return _as_stored(stored)


def clear_contracts(wiring: Wiring, caller: User) -> ContractsShown:
    """Store an empty version (an admin's key only); nothing changes when none are stored."""
    actor = _admin(caller)
    current = wiring.contracts.get()
    if current is None or not current.text:
        return _as_stored(current)
    stored = wiring.contracts.put("", "", actor, after=current.version)
    remember_stored(wiring, stored)
    append_audit(wiring.settings, actor=actor, action="contracts.clear", target=current.file,
                 detail={"version": stored.version, "cleared_version": current.version})  # fmt: skip
    return _as_stored(stored)


def show_contracts(wiring: Wiring, caller: User) -> ContractsShown:
    """The stored contracts as `caller` may see them (module docstring)."""
    stored = stored_contracts(wiring, fresh=True)
    if stored is None or not stored.text:
        version = stored.version if stored else 0
        return ContractsShown(version, "", "", [], stored.set_by if stored and caller.admin else None,
                              stored.set_at if stored and caller.admin else None)  # fmt: skip
    values = contracts_values(stored.text, stored.file)
    declared_teams = sorted(str(t) for t in values.get("teams") or {})
    if caller.admin:
        return ContractsShown(stored.version, stored.file, stored.text, declared_teams, stored.set_by,
                              stored.set_at)  # fmt: skip
    own = tenancy.teams_of(wiring.settings, caller.user_id)
    teams = values.get("teams") or {}
    mine = {name: part for name, part in teams.items() if str(name) in own}
    shown = {key: value for key, value in values.items() if key != "teams"}
    if mine:
        shown["teams"] = mine
    text = yaml.safe_dump(shown, sort_keys=False) if shown else ""
    return ContractsShown(stored.version, stored.file, text, sorted(str(t) for t in mine), None, None)
