"""/admin/contracts: the deployment's contracts (shared/jobs/contract_admin.py). An admin sets and clears
them; any user reads the deployment's part and their own teams' parts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from functions.submit.lazy_modules import module_on_first_use
from shared.config import Settings
from shared.store.users import User
from shared.wiring import wiring_for

if TYPE_CHECKING:
    from shared.api import admin_models
    from shared.api.admin_models import ContractsRequest, ContractsView
else:  # the API's model modules: imported by the first request of a route that reads one
    admin_models = module_on_first_use("shared.api.admin_models")

if TYPE_CHECKING:
    from shared.jobs import contract_admin
    from shared.jobs.contract_admin import ContractsShown
else:  # imported by the first request of these routes
    contract_admin = module_on_first_use("shared.jobs.contract_admin")

Route = Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]
ERRORS = (400, 403, 409, 413, 422)


def _shown(shown: ContractsShown) -> ContractsView:
    return admin_models.ContractsView(**shown.__dict__)


def register(route: Route) -> None:
    """Add the /admin/contracts routes with `route` (app.py's `_route`)."""

    @route(
        "/admin/contracts",
        "PUT",
        "Set the deployment's contracts from a contracts file's text (admin)",
        body=lambda: admin_models.ContractsRequest,
        response=lambda: admin_models.ContractsView,
        errors=ERRORS,
    )
    def put_contracts(caller: User, body: ContractsRequest) -> ContractsView:
        wiring = wiring_for(Settings.from_env())
        return _shown(contract_admin.set_contracts(wiring, caller, file=body.file, text=body.text))

    @route(
        "/admin/contracts",
        "GET",
        "The deployment's contracts (a non-admin: theirs and their teams')",
        response=lambda: admin_models.ContractsView,
        errors=ERRORS,
    )
    def get_contracts(caller: User) -> ContractsView:
        return _shown(contract_admin.show_contracts(wiring_for(Settings.from_env()), caller))

    @route(
        "/admin/contracts",
        "DELETE",
        "Clear the deployment's contracts (admin)",
        response=lambda: admin_models.ContractsView,
        errors=ERRORS,
    )
    def delete_contracts(caller: User) -> ContractsView:
        return _shown(contract_admin.clear_contracts(wiring_for(Settings.from_env()), caller))
