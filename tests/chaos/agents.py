"""Node agents, simulated: each running node's agent goes through the real agent protocol (token check,
config, setting_up, running, heartbeats, the outcome), calling the same operations the API calls. A call
that crashes is a failed HTTP request: the agent tries the same step again later. An agent told to stop
(410 or `stop`) ends its task; a node that is killed ends its agent."""

from __future__ import annotations

import random
from dataclasses import dataclass

from chaos.sim_cloud import Monitor, SimNode
from shared.api.auth import AuthError, StaleAttemptError, authenticate_agent, authenticate_boot
from shared.config import Settings
from shared.errors import NotFoundError
from shared.jobs.agent_reports import AgentReport, report_agent_status
from shared.jobs.node_claims import first_config
from shared.jobs.tokens import agent_token, boot_token
from shared.wiring import wiring_for

LONG_WORK = 40


@dataclass
class SimAgent:
    node: SimNode
    work: int  # heartbeats of `run` before the task exits
    fails: bool  # the task exits 1 (user code failing), else 0
    phase: str = "boot"  # boot -> setup -> run -> gone
    ignored_401: int = 0

    @property
    def job_id(self) -> str:
        return self.node.spec.job_id

    @property
    def cluster_id(self) -> str:
        return self.node.spec.cluster_id

    def token(self, settings: Settings) -> str:
        """The agent token its config fetch (with the boot token in its user-data) hands over."""
        return agent_token(settings, self.job_id, self.node.spec.attempt)


class AgentFleet:
    def __init__(self, settings: Settings, rng: random.Random, monitor: Monitor, work: int, fail_rate: float):
        self.settings = settings
        self.rng = rng
        self.monitor = monitor
        self.work = work
        self.fail_rate = fail_rate
        self.agents: dict[str, SimAgent] = {}
        self.stopped_by_api = 0  # agents told to stop (410 or stop: true) that stopped
        self.refused = 0  # agents refused with 401 (they exit before running anything)
        self.long_jobs: set[str] = set()  # jobs whose tasks run LONG_WORK times longer

    def boot(self, nodes: list[SimNode]) -> None:
        for node in nodes:
            if node.running and node.instance_id not in self.agents:
                fails = self.rng.random() < self.fail_rate
                longer = LONG_WORK if node.spec.job_id in self.long_jobs else 1
                work = self.rng.randint(1, self.work) * longer
                self.agents[node.instance_id] = SimAgent(node, work, fails)

    def live(self) -> list[SimAgent]:
        self.reap()
        return [a for a in self.agents.values() if a.phase != "gone"]

    def reap(self) -> None:
        """Agents of killed nodes are gone (their task with them)."""
        for agent in self.agents.values():
            if agent.phase != "gone" and not agent.node.running:
                self._end(agent)

    def notice(self, agent: SimAgent) -> None:
        """A preemption notice: the agent reports `preempting` (if the call gets through)."""
        if agent.phase in ("setup", "run"):
            self._report(agent, "preempting", None)

    def step(self, agent: SimAgent) -> None:
        if not agent.node.running:
            self._end(agent)
            return
        if agent.phase == "boot":
            self._boot(agent)
            return
        try:
            authenticate_agent(
                {"authorization": f"Bearer {agent.token(self.settings)}"}, agent.job_id, self.settings
            )
        except StaleAttemptError:
            self.stopped_by_api += 1
            self._end(agent)
            return
        except AuthError:
            self.refused += 1
            self._end(agent)
            return
        if agent.phase == "setup":
            if self._report(agent, "running", None):
                agent.phase = "run"
                self.monitor.task_changed(agent.job_id, agent.cluster_id, True)
        elif agent.phase == "run":
            if agent.work > 0:
                if self._report(agent, "heartbeat", None):
                    agent.work -= 1
            else:
                outcome = ("failed", 1) if agent.fails else ("succeeded", 0)
                if self._report(agent, *outcome):
                    self._end(agent)

    def _boot(self, agent: SimAgent) -> None:
        """The config fetch with the boot token from user-data, as the real agent makes it (the API's
        authenticate_boot and first_config): 425 (None) is waited out; a refusal ends the agent."""
        boot = boot_token(self.settings, agent.job_id, agent.node.spec.attempt)
        headers = {
            "authorization": f"Bearer {boot}",
            "x-skyless-node-key": f"key-of-{agent.node.instance_id}",
        }
        try:
            caller = authenticate_boot(headers, agent.job_id, self.settings)
            config = first_config(
                self.settings, agent.job_id, agent.node.instance_id, caller.attempt, caller.node_key
            )
        except StaleAttemptError:
            self.stopped_by_api += 1
            self._end(agent)
            return
        except (AuthError, NotFoundError):
            self.refused += 1
            self._end(agent)  # not a node of the job's current cluster: the real agent exits
            return
        if config is not None and self._report(agent, "setting_up", None):
            agent.phase = "setup"

    def _report(self, agent: SimAgent, phase: str, exit_code: int | None) -> bool:
        """True when the report got an answer that lets the agent go on."""
        answer = report_agent_status(
            wiring_for(self.settings),
            AgentReport(agent.job_id, agent.node.instance_id, phase, exit_code=exit_code),
        )
        if phase in ("succeeded", "failed"):
            return True  # the task has exited either way
        if answer.stop or answer.cancel:
            self.stopped_by_api += 1
            self._end(agent)
            return False
        return True

    def _end(self, agent: SimAgent) -> None:
        if agent.phase == "run":
            self.monitor.task_changed(agent.job_id, agent.cluster_id, False)
        agent.phase = "gone"
