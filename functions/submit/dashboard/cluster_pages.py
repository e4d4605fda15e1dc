"""The dashboard's named clusters (`skyless launch -c NAME`): every cluster of the user with its state,
nodes, autostop and cost so far; one cluster with its nodes, its jobs (the `queue NAME` view) and its
timeline; for an admin, every user's clusters with their owners (`GET /clusters?all_users=true`). Read-only:
the CLI changes clusters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chalice import Chalice

from functions.submit.dashboard.page_routes import BASE, Page, PageRequest, page_route
from functions.submit.lazy_modules import module_on_first_use
from functions.submit.route_table import QueryParam, every_user_asked

if TYPE_CHECKING:
    from shared.clusters import views
    from shared.store import users
else:  # imported by the first request of one of these pages
    views = module_on_first_use("shared.clusters.views")
    users = module_on_first_use("shared.store.users")


def register_cluster_pages(app: Chalice, settings_of: Any) -> None:
    def route(path: str, method: str, summary: str, **spec: Any) -> Any:
        return page_route(app, settings_of, path, method, summary, **spec)

    @route(
        f"{BASE}/clusters",
        "GET",
        "The user's named clusters: state, nodes, autostop, cost so far",
        query=(QueryParam("all_users", "string", "true: every user's, each with its owner (an admin key)"),),
        errors=(400, 403),
    )
    def clusters_page(request: PageRequest) -> Page:
        assert request.session is not None
        all_users = every_user_asked(request.session.user.admin, request.query, "every user's clusters")
        clusters = views.list_clusters(request.settings, owner=None if all_users else _owner(request))
        total = round(sum(float(c["cost"]) for c in clusters), 6)
        owners = users.user_names(request.settings) if all_users else {}
        return Page(
            "clusters.html", {"clusters": clusters, "total": total, "all_users": all_users, "owners": owners}
        )

    @route(f"{BASE}/clusters/{{name}}", "GET", "One named cluster: nodes, its jobs, timeline", errors=(404,))
    def cluster_page(request: PageRequest, name: str) -> Page:
        owner = _owner(request)
        cluster = views.get_cluster(
            request.settings, owner=owner, name=name
        )  # another user's: 404, as the API
        jobs = views.cluster_queue(request.settings, owner=owner, name=name, limit=100)
        return Page("cluster.html", {"cluster": cluster, "jobs": jobs})


def _owner(request: PageRequest) -> str:
    assert request.session is not None
    return request.session.user.user_id
