"""moto's TransactWriteItems, with a rollback that copies the items a transaction touches, not its tables.

moto backs up every table a transaction names with a deep copy before it writes, so each transition of a
job costs time in proportion to everything the tables hold: the local runtime got slower with every job it
ever ran (the events table only grows), and a state change cost tens of milliseconds (see
benchmarks/control_plane.py). Here the backup is the touched items (deep copies) and the length of each
table's stream shard; on failure they are put back and the stream records of the failed writes dropped,
which is what moto's table restore did. moto's own logic (conditions, writes, errors) runs unchanged; only
its table copy is made a no-op while it runs. Safe because the embedded endpoint runs one DynamoDB call at
a time (local_runtime/moto_endpoint.py).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

_installed = False
_lock = threading.Lock()


class _KeepTables:
    """Stands in for the `copy` module inside moto's DynamoDB models while a transaction runs: tables are
    not copied (the items are, beforehand); anything else is deep-copied as before."""

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)


def _item_backups(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    backups = []
    for entry in transact_items:
        if len(entry) != 1:
            continue  # moto refuses it before writing anything
        ((op_type, op),) = entry.items()
        table = backend.tables.get(op.get("TableName"))
        if table is None:
            continue
        key = op.get("Item") if op_type == "Put" else op.get("Key")
        if not key or table.hash_key_attr not in key:
            continue
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = None
        if table.range_key_attr is not None:
            if table.range_key_attr not in key:
                continue
            range_value = DynamoType(key[table.range_key_attr])
        current = table.get_item(hash_value, range_value)
        backups.append((table, hash_value, range_value, copy.deepcopy(current)))
    return backups


def _restore(backups: list[tuple[Any, ...]]) -> None:
    for table, hash_value, range_value, item in reversed(backups):
        if range_value is None:
            if item is None:
                table.items.pop(hash_value, None)
            else:
                table.items[hash_value] = item
        elif item is None:
            table.items.get(hash_value, {}).pop(range_value, None)
        else:
            table.items[hash_value][range_value] = item


def install() -> None:
    """Replace DynamoDBBackend.transact_write_items (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        original = DynamoDBBackend.transact_write_items

        def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
            backups = _item_backups(self, transact_items)
            shards = {id(b[0]): b[0].stream_shard for b in backups if b[0].stream_shard is not None}
            lengths = {key: len(shard.items) for key, shard in shards.items()}
            dynamodb_models.copy = _KeepTables  # type: ignore[assignment]
            try:
                return original(self, transact_items)
            except BaseException:
                _restore(backups)
                for key, shard in shards.items():
                    del shard.items[lengths[key] :]
                raise
            finally:
                dynamodb_models.copy = copy

        DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
        _installed = True
