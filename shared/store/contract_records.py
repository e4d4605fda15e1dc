"""The deployment's contracts as an admin set them (`skyless admin contracts set FILE`): one item of the
events table, partition `contracts`, sort key `deployment`, holding the YAML text, the file name it came from,
who set it and a version that grows by one with each change.

A change is written on the condition that the version read is still the stored one, so two admins setting
contracts at once cannot both win silently: the second is a ConflictError (set again). Clearing writes an
item with no text at the next version (the history of versions is never reused). The `ContractRecords` port,
its DynamoDB adapter, and `MemoryContractRecords` (same conditions, for tests).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DoesNotExist, PutError
from pynamodb.models import Model

from shared.config import Settings
from shared.errors import ConflictError
from shared.store.models import with_shared_session

CONTRACTS_PARTITION = "contracts"
CONTRACTS_KEY = "deployment"


@dataclass(frozen=True)
class StoredContracts:
    version: int
    text: str  # "" once cleared
    file: str  # the name the admin gave (errors and `show` name it)
    set_by: str
    set_at: float


class ContractRecords(Protocol):
    def get(self) -> StoredContracts | None:
        """The stored contracts (cleared ones too: `text` ""), None when none were ever set."""
        ...

    def put(self, text: str, file: str, set_by: str, after: int) -> StoredContracts:
        """Store `text` as version `after + 1`, only while version `after` (0: none) is the stored one;
        else ConflictError."""
        ...


class ContractsItem(Model):
    class Meta:
        table_name = "unbound-events"

    job_id = UnicodeAttribute(hash_key=True)  # always CONTRACTS_PARTITION
    at = UnicodeAttribute(range_key=True)  # always CONTRACTS_KEY
    kind = UnicodeAttribute(default="contracts")
    message = UnicodeAttribute(default="")
    version = NumberAttribute()
    text = UnicodeAttribute(default="")
    file = UnicodeAttribute(default="")
    set_by = UnicodeAttribute(default="")
    set_at = NumberAttribute(default=0)


@cache
def contracts_model(settings: Settings) -> type[ContractsItem]:
    meta = type(
        "Meta",
        (),
        {
            "table_name": settings.table_name("events"),
            "region": settings.region,
            "host": settings.endpoint_url,
        },
    )
    return with_shared_session(type(f"ContractsItem_{settings.prefix}", (ContractsItem,), {"Meta": meta}))


def _conflict(after: int) -> ConflictError:
    return ConflictError(
        f"the contracts changed since version {after} was read", hint="set them again, over the new version"
    )


class DynamoContractRecords:
    def __init__(self, settings: Settings) -> None:
        self.model = contracts_model(settings)

    def get(self) -> StoredContracts | None:
        try:
            item = self.model.get(CONTRACTS_PARTITION, CONTRACTS_KEY, consistent_read=True)
        except DoesNotExist:
            return None
        return StoredContracts(int(item.version), item.text or "", item.file or "", item.set_by or "",
                               float(item.set_at or 0))  # fmt: skip

    def put(self, text: str, file: str, set_by: str, after: int) -> StoredContracts:
        stored = StoredContracts(after + 1, text, file, set_by, time.time())
        condition = self.model.version.does_not_exist() if after == 0 else self.model.version == after
        item = self.model(
            job_id=CONTRACTS_PARTITION, at=CONTRACTS_KEY, version=stored.version, text=text, file=file,
            set_by=set_by, set_at=stored.set_at,
            message=f"contracts version {stored.version} from {file}" if text else "contracts cleared",
        )  # fmt: skip
        try:
            item.save(condition=condition)
        except PutError as error:
            if "ConditionalCheckFailed" in str(error.cause_response_code or error):
                raise _conflict(after) from None
            raise
        return stored


class MemoryContractRecords:
    def __init__(self) -> None:
        self._stored: StoredContracts | None = None
        self._lock = threading.Lock()
        self.reads = 0

    def get(self) -> StoredContracts | None:
        with self._lock:
            self.reads += 1
            return self._stored

    def put(self, text: str, file: str, set_by: str, after: int) -> StoredContracts:
        with self._lock:
            if (self._stored.version if self._stored else 0) != after:
                raise _conflict(after)
            self._stored = StoredContracts(after + 1, text, file, set_by, time.time())
            return self._stored
