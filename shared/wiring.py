"""The one place that builds the adapters from Settings. Built once per Settings, reused while warm."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING

from shared.aws.object_store import ObjectStore, S3ObjectStore
from shared.aws.queues import Queues
from shared.clouds.registry import ProviderRegistry
from shared.config import Settings
from shared.store.job_store import Cooldowns, JobStore
from shared.store.jobs import DynamoJobStore
from shared.store.notifications import DynamoNotificationStore, NotificationStore
from shared.store.reaper_marks import DynamoReaperMarks, ReaperMarks
from shared.store.schedules import DynamoScheduleStore, ScheduleStore

if TYPE_CHECKING:
    from shared.budgets.records import BudgetStore
    from shared.catalog.model import Catalog
    from shared.price_refresh.versioned_catalog import StoredCatalogLoader
    from shared.store.contract_records import ContractRecords


@dataclass
class Wiring:
    settings: Settings
    store: JobStore
    queues: Queues
    objects: ObjectStore
    providers: ProviderRegistry
    cooldown_record: Cooldowns | None = None  # None: the DynamoDB record beside the store's clusters
    schedule_records: ScheduleStore | None = None  # None: the schedules table
    notification_records: NotificationStore | None = None  # None: the notifications table
    reaper_mark_records: ReaperMarks | None = None  # None: the events table's `reaper-marks` partition
    budget_records: BudgetStore | None = None  # None: the events table's `budgets` partition
    contract_records: ContractRecords | None = None  # None: the events table's `contracts` item

    @cached_property
    def catalog_loader(self) -> StoredCatalogLoader:
        from shared.price_refresh.versioned_catalog import StoredCatalogLoader

        return StoredCatalogLoader(self.objects)

    @cached_property
    def cooldowns(self) -> Cooldowns:
        """Recent spot preemptions by zone (shared/store/cooldowns.py), for the cool-down policy."""
        if self.cooldown_record is not None:
            return self.cooldown_record
        from shared.store.cooldowns import CooldownStore

        return CooldownStore(self.settings)

    @cached_property
    def schedules(self) -> ScheduleStore:
        """Users' cron schedules (shared/store/schedules.py)."""
        return self.schedule_records or DynamoScheduleStore(self.settings)

    @cached_property
    def notifications(self) -> NotificationStore:
        """Notification settings, per-job overrides and send claims (shared/store/notifications.py)."""
        return self.notification_records or DynamoNotificationStore(self.settings)

    @cached_property
    def reaper_marks(self) -> ReaperMarks:
        """The orphan reaper's marks of clusters no live job owns (shared/store/reaper_marks.py)."""
        return self.reaper_mark_records or DynamoReaperMarks(self.settings)

    @cached_property
    def budgets(self) -> BudgetStore:
        """Monthly budgets and the claims of budget notices (shared/budgets/records.py)."""
        if self.budget_records is not None:
            return self.budget_records
        from shared.budgets.records import DynamoBudgets

        return DynamoBudgets(self.settings)

    @cached_property
    def contracts(self) -> ContractRecords:
        """The deployment's contracts as an admin set them (shared/store/contract_records.py)."""
        if self.contract_records is not None:
            return self.contract_records
        from shared.store.contract_records import DynamoContractRecords, MemoryContractRecords
        from shared.store.memory import MemoryJobStore

        if isinstance(self.store, MemoryJobStore):  # a harness's jobs in memory (benchmarks/): none stored
            return MemoryContractRecords()
        return DynamoContractRecords(self.settings)

    def with_cooldowns(self, cooldowns: Cooldowns) -> Wiring:
        """This wiring (its warm adapters and catalog shared) reading the cool-down record via `cooldowns`."""
        self.catalog_loader  # built here first, so that both wirings share one catalog  # noqa: B018
        other = copy.copy(self)
        other.cooldown_record = cooldowns
        other.__dict__.pop("cooldowns", None)  # the cached property of the copied adapters
        return other

    @property
    def catalog(self) -> Catalog:
        """Built-in + imported + the refreshed version in the bucket; re-read when LATEST moves (TTL)."""
        return self.catalog_loader.catalog()


_installed: dict[Settings, Wiring] = {}


def install_wiring(wiring: Wiring) -> None:
    """Use `wiring` for its settings from now on, wherever `wiring_for` is asked: how a harness (the chaos
    runs: tests/chaos/) puts its fault-injecting adapters under every entry point. Not for the product."""
    _installed[wiring.settings] = wiring


def uninstall_wiring(settings: Settings) -> None:
    _installed.pop(settings, None)


def wiring_for(settings: Settings) -> Wiring:
    return _installed.get(settings) or _built_wiring(settings)


@cache
def _built_wiring(settings: Settings) -> Wiring:
    return Wiring(
        settings=settings,
        store=DynamoJobStore(settings),
        queues=Queues(settings),
        objects=S3ObjectStore(settings),
        providers=ProviderRegistry(settings),
    )


def current_wiring() -> Wiring:
    """The adapters for the settings in this process's environment (what handlers use)."""
    return wiring_for(Settings.from_env())
