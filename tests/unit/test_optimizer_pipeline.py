"""plan_pipeline: chains by DP and DAGs by exact search equal brute force over every assignment."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.catalog.model import Catalog
from shared.catalog.offering import Offering
from shared.errors import NoOfferingError
from shared.optimizer import EGRESS_PER_GB, Edge, plan_pipeline, plan_task
from shared.optimizer.plan import Candidate
from shared.task.requests import ResourceChoice, ResourceRequest


@dataclass
class FakeTask:
    choice: ResourceChoice
    num_nodes: int = 1
    name: str | None = None
    inputs: dict[str, float] | None = None
    outputs_gb: float = 0.0

    @property
    def inputs_gb(self) -> float:
        return next(iter(self.inputs.values())) if self.inputs else 0.0

    def resource_choice(self) -> ResourceChoice:
        return self.choice


@dataclass
class FakePipeline:
    tasks: list[FakeTask] = field(default_factory=list)
    execution: str = "serial"


def request(**fields: object) -> ResourceChoice:
    return ResourceChoice((ResourceRequest(**fields),))  # type: ignore[arg-type]


def egress(source: str, target: str, gigabytes: float) -> float:
    return 0.0 if source == target else gigabytes * EGRESS_PER_GB[source]


def hours_to_move(source: str, target: str, gigabytes: float) -> float:
    return 0.0 if source == target else gigabytes * 8 / 10 / 3600


SCHEMES = {"s3": "aws", "gs": "gcp"}


def stored_inputs(pipeline: FakePipeline, edges: list[Edge]) -> dict[int, tuple[str, float]]:
    """Tasks without a parent read their `inputs` from the bucket's cloud."""
    found = {}
    for i, t in enumerate(pipeline.tasks):
        if t.inputs and all(e.target != i for e in edges):
            uri, gigabytes = next(iter(t.inputs.items()))
            found[i] = (SCHEMES[uri.split("://")[0]], gigabytes)
    return found


def objective(
    chosen: list[Candidate], edges: list[Edge], minimize: str, stored: dict[int, tuple[str, float]]
) -> tuple[float, ...]:
    cost = sum(c.estimated_cost for c in chosen)
    cost += sum(egress(chosen[e.source].cloud, chosen[e.target].cloud, e.gigabytes) for e in edges)
    cost += sum(egress(cloud, chosen[i].cloud, gb) for i, (cloud, gb) in stored.items())
    if minimize == "cost":
        return (cost,)
    finish: dict[int, float] = {}
    for v in range(len(chosen)):  # tasks are numbered in a topological order in these tests
        start = hours_to_move(stored[v][0], chosen[v].cloud, stored[v][1]) if v in stored else 0.0
        for e in edges:
            if e.target == v:
                moved = hours_to_move(chosen[e.source].cloud, chosen[v].cloud, e.gigabytes)
                start = max(start, finish[e.source] + moved)
        finish[v] = start + chosen[v].estimated_hours
    return (max(finish.values()), cost)


def every_place(task: FakeTask, catalog: Catalog, minimize: str) -> list[Candidate]:
    """Every feasible candidate; for an `ordered` choice, those of its first feasible alternative."""
    everything = plan_task(task.choice, task.num_nodes, catalog, minimize=minimize, max_candidates=None)
    if not task.choice.ordered:
        return everything
    for alternative in task.choice.requests:
        places = {_place(c) for c in _feasible(alternative, task, catalog)}
        own = [c for c in everything if _place(c) in places]
        if own:
            return own
    return []


def _place(c: Candidate) -> tuple:
    return (c.cloud, c.region, c.zone, c.instance_type, c.use_spot)


def _feasible(alternative: ResourceRequest, task: FakeTask, catalog: Catalog) -> list[Candidate]:
    try:
        return plan_task(ResourceChoice((alternative,)), task.num_nodes, catalog, max_candidates=None)
    except NoOfferingError:
        return []


def brute_force(
    pipeline: FakePipeline, catalog: Catalog, edges: list[Edge], minimize: str
) -> tuple[float, ...]:
    options = [every_place(t, catalog, minimize) for t in pipeline.tasks]
    stored = stored_inputs(pipeline, edges)
    values = (objective(list(c), edges, minimize, stored) for c in itertools.product(*options))
    return min(values, key=lambda v: tuple(round(x, 9) for x in v))  # hours equal to 1e-9: cost decides


def chain_edges(pipeline: FakePipeline) -> list[Edge]:
    t = pipeline.tasks
    return [Edge(i, i + 1, t[i].outputs_gb or t[i + 1].inputs_gb) for i in range(len(t) - 1)]


CLOUDS = {
    "aws": ("us-east-1", "us-west-2"),
    "gcp": ("us-central1",),
    "azure": ("eastus",),
    "lambda": ("us-tx-1",),
}
HARDWARE = [("T4", 1.0, 8.0), ("A100", 1.0, 12.0), ("H100", 1.0, 26.0), (None, 0.0, 8.0)]


@st.composite
def small_catalogs(draw: st.DrawFn) -> Catalog:
    rows = []
    for cloud, regions in CLOUDS.items():
        for region in regions:
            for acc, count, vcpus in draw(
                st.lists(st.sampled_from(HARDWARE), min_size=1, max_size=3, unique=True)
            ):
                price = draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 4.0]))
                spot = draw(st.none() | st.sampled_from([0.3, 0.6, 1.2]))
                zone = f"{region}a" if cloud in ("aws", "gcp") else None
                rows.append(
                    Offering(
                        cloud,
                        region,
                        zone,
                        f"{cloud}-{acc or 'cpu'}",
                        acc,
                        count,
                        None,
                        vcpus,
                        32,
                        price,
                        spot,
                    )
                )
    return Catalog(rows)


CHOICES = [
    request(accelerator="T4", accelerator_count=1),
    request(accelerator="A100", accelerator_count=1),
    ResourceChoice(tuple(ResourceRequest(accelerator=a, accelerator_count=1) for a in ("A100", "H100"))),
    request(cpus=4),
    request(accelerator="T4", accelerator_count=1, use_spot=True),
    ResourceChoice(
        (
            ResourceRequest(accelerator="T4", accelerator_count=1, cloud="azure"),
            ResourceRequest(accelerator="H100", accelerator_count=1),
            ResourceRequest(accelerator="T4", accelerator_count=1),
        ),
        ordered=True,
    ),
]


@st.composite
def pipelines(draw: st.DrawFn, size: st.SearchStrategy[int]) -> FakePipeline:
    tasks = [
        FakeTask(
            draw(st.sampled_from(CHOICES)),
            num_nodes=draw(st.integers(1, 2)),
            outputs_gb=draw(st.sampled_from([0.0, 5.0, 30.0, 400.0])),
            inputs=draw(st.sampled_from([None, {"s3://b/x": 20.0}, {"gs://b/y": 300.0}])),
        )
        for _ in range(draw(size))
    ]
    return FakePipeline(tasks)


def _plannable(pipeline: FakePipeline, catalog: Catalog) -> bool:
    try:
        for t in pipeline.tasks:
            plan_task(t.choice, 1, catalog)
    except NoOfferingError:
        return False
    return True


def check_plan_is_optimal(
    catalog: Catalog, pipeline: FakePipeline, edges: list[Edge], minimize: str, explicit: bool
) -> None:
    if not _plannable(pipeline, catalog):
        with pytest.raises(NoOfferingError):
            plan_pipeline(pipeline, catalog, minimize=minimize)
        return
    plan = plan_pipeline(pipeline, catalog, minimize=minimize, edges=edges if explicit else None)
    chosen = [t.chosen for t in plan.tasks]
    stored = stored_inputs(pipeline, edges)
    best = brute_force(pipeline, catalog, edges, minimize)
    assert objective(chosen, edges, minimize, stored) == pytest.approx(best)
    assert plan.total_cost == pytest.approx(objective(chosen, edges, "cost", stored)[0])
    moved = plan.total_cost - sum(c.estimated_cost for c in chosen)
    assert plan.egress_cost == pytest.approx(moved)


SLOW = [HealthCheck.too_slow, HealthCheck.filter_too_much]
OBJECTIVES = st.sampled_from(["cost", "time"])


@settings(max_examples=80, deadline=None, suppress_health_check=SLOW)
@given(small_catalogs(), pipelines(st.integers(2, 4)), OBJECTIVES)
def test_chain_plan_is_as_good_as_every_assignment(
    catalog: Catalog, pipeline: FakePipeline, minimize: str
) -> None:
    check_plan_is_optimal(catalog, pipeline, chain_edges(pipeline), minimize, explicit=False)


@settings(max_examples=50, deadline=None, suppress_health_check=SLOW)
@given(small_catalogs(), pipelines(st.integers(1, 3)), OBJECTIVES)
def test_job_group_plan_is_as_good_as_every_assignment(
    catalog: Catalog, pipeline: FakePipeline, minimize: str
) -> None:
    pipeline.execution = "parallel"
    check_plan_is_optimal(catalog, pipeline, [], minimize, explicit=False)


DIAMOND = [(0, 1), (0, 2), (1, 3), (2, 3)]


@settings(max_examples=60, deadline=None, suppress_health_check=SLOW)
@given(
    small_catalogs(),
    pipelines(st.just(4)),
    st.lists(st.sampled_from([0.0, 10.0, 300.0]), min_size=4, max_size=4),
    OBJECTIVES,
)
def test_diamond_dag_plan_is_as_good_as_every_assignment(
    catalog: Catalog, pipeline: FakePipeline, sizes: list[float], minimize: str
) -> None:
    edges = [Edge(a, b, gb) for (a, b), gb in zip(DIAMOND, sizes, strict=True)]
    check_plan_is_optimal(catalog, pipeline, edges, minimize, explicit=True)


CATALOG = Catalog(
    [
        Offering("gcp", "us-central1", "us-central1-a", "a2-highgpu-1g", "A100", 1, None, 12, 85, 3.0, None),
        Offering("lambda", "us-tx-1", None, "gpu_1x_a100", "A100", 1, None, 30, 200, 4.0, None),
        Offering("gcp", "us-central1", "us-central1-a", "g2-standard-4", "L4", 1, None, 4, 16, 0.9, None),
        Offering("lambda", "us-tx-1", None, "gpu_1x_l4", "L4", 1, None, 8, 32, 0.5, None),
        Offering("aws", "us-east-1", "us-east-1a", "g6.xlarge", "L4", 1, None, 4, 16, 0.8, None),
    ]
)
TRAIN = request(accelerator="A100", accelerator_count=1)
SERVE = request(accelerator="L4", accelerator_count=1)


def test_chain_stays_in_one_cloud_when_egress_outweighs_a_cheaper_next_step() -> None:
    pipeline = FakePipeline([FakeTask(TRAIN, name="train", outputs_gb=100), FakeTask(SERVE, name="serve")])
    plan = plan_pipeline(pipeline, CATALOG)
    assert [t.chosen.cloud for t in plan.tasks] == ["gcp", "gcp"]  # lambda saves $0.40, egress costs $12
    assert plan.egress_cost == 0.0
    assert plan.total_cost == pytest.approx(3.0 + 0.9)


def test_chain_moves_clouds_when_the_saving_beats_the_egress() -> None:
    pipeline = FakePipeline([FakeTask(TRAIN, outputs_gb=2), FakeTask(SERVE, num_nodes=4)])
    plan = plan_pipeline(pipeline, CATALOG)
    assert [t.chosen.cloud for t in plan.tasks] == ["gcp", "lambda"]
    assert plan.egress_cost == pytest.approx(2 * EGRESS_PER_GB["gcp"])
    assert plan.total_cost == pytest.approx(3.0 + 4 * 0.5 + 2 * 0.12)


def test_failover_after_the_chosen_place_counts_the_data_it_would_have_to_move() -> None:
    pipeline = FakePipeline([FakeTask(TRAIN, outputs_gb=100), FakeTask(SERVE)])
    serve = plan_pipeline(pipeline, CATALOG).tasks[1]
    alone = plan_task(SERVE, 1, CATALOG)
    assert [c.cloud for c in alone] == ["lambda", "aws", "gcp"]
    assert [c.cloud for c in serve.candidates] == ["gcp", "lambda", "aws"]  # both others pay $12 egress
    assert serve.chosen == alone[2]


def test_without_data_to_move_each_task_keeps_its_own_failover_order() -> None:
    pipeline = FakePipeline([FakeTask(TRAIN), FakeTask(SERVE)])
    plan = plan_pipeline(pipeline, CATALOG)
    assert [t.candidates for t in plan.tasks] == [plan_task(TRAIN, 1, CATALOG), plan_task(SERVE, 1, CATALOG)]


def test_parallel_job_group_plans_each_task_on_its_own() -> None:
    group = FakePipeline([FakeTask(TRAIN, outputs_gb=100), FakeTask(SERVE)], execution="parallel")
    plan = plan_pipeline(group, CATALOG)
    assert [t.chosen for t in plan.tasks] == [
        plan_task(TRAIN, 1, CATALOG)[0],
        plan_task(SERVE, 1, CATALOG)[0],
    ]
    assert plan.egress_cost == 0.0


def test_time_objective_lets_a_task_off_the_critical_path_take_a_cheaper_slower_option() -> None:
    catalog = Catalog(
        [
            Offering("gcp", "us-central1", None, "t4-vm", "T4", 1, None, 8, 32, 0.4, None),
            Offering("gcp", "us-central1", None, "a100-vm", "A100", 1, None, 12, 85, 3.0, None),
            Offering("gcp", "us-central1", None, "h100-vm", "H100", 1, None, 26, 200, 9.0, None),
        ]
    )
    slow = FakeTask(request(accelerator="T4", accelerator_count=1))
    either = FakeTask(
        ResourceChoice(tuple(ResourceRequest(accelerator=a, accelerator_count=1) for a in ("A100", "H100")))
    )
    group = plan_pipeline(FakePipeline([slow, either], execution="parallel"), catalog, minimize="time")
    assert plan_task(either.choice, 1, catalog, minimize="time")[0].accelerator == "H100"
    assert group.tasks[1].chosen.accelerator == "A100"  # the T4 task takes 1 h anyway


def test_ordered_task_keeps_its_first_alternative_and_its_neighbour_follows_it() -> None:
    serve_ordered = ResourceChoice(
        (
            ResourceRequest(accelerator="L4", accelerator_count=1, cloud="lambda"),
            ResourceRequest(accelerator="L4", accelerator_count=1, cloud="gcp"),
        ),
        ordered=True,
    )
    pipeline = FakePipeline([FakeTask(TRAIN, outputs_gb=100), FakeTask(serve_ordered)])
    plan = plan_pipeline(pipeline, CATALOG)
    # serving on gcp (the second choice) would be cheaper overall; the first choice wins, and training
    # moves to lambda rather than pay $12 of egress
    assert [t.chosen.cloud for t in plan.tasks] == ["lambda", "lambda"]
    assert plan.total_cost == pytest.approx(4.0 + 0.5) and plan.egress_cost == 0.0
    assert [c.cloud for c in plan.tasks[1].candidates] == ["lambda", "gcp"]


def test_a_task_nothing_fits_is_named_in_the_error() -> None:
    pipeline = FakePipeline(
        [FakeTask(TRAIN, name="train"), FakeTask(request(accelerator="H100"), name="serve")]
    )
    with pytest.raises(NoOfferingError) as raised:
        plan_pipeline(pipeline, CATALOG)
    assert raised.value.message.startswith("task 'serve': no offering fits H100:1")
