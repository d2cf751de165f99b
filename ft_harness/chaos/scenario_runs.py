"""Failover scenario runs in the session's live Airflow, triggered once and shared by test modules.

``tests/e2e/test_region_failover.py`` starts all of them at once (the scheduler works on them
concurrently) and checks each; ``tests/ui`` reads the finished ``seed002_c_fails`` run and then
restarts a region of it, so it runs after the e2e checks (pytest's directory order) and never
triggers a run of its own. Asked for alone, a scenario is triggered on first use.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import pytest

from tests.e2e.dags.ft_e2e_exchange_matrix import SHAPES as MATRIX_SHAPES

SCENARIOS = {
    # seed 002: C fails once (before submitting) -> only C re-runs
    "seed002_c_fails": ("ft_e2e_seed002", {"ft_faults": [{"task": "C", "times": 1}]}),
    # seed 002: D's task process is SIGKILLed after its Spark work, before its commit -> D's next try
    # commits that output without Spark (stage_try/adoption.py)
    "seed002_d_killed": ("ft_e2e_seed002", {"ft_faults": [{"task": "D", "mode": "kill"}]}),
    # seed 002: one object of B's partition is lost before C reads it -> B, C and D re-run, A does not
    "seed002_b_lost": ("ft_e2e_seed002", {"ft_faults": [{"task": "C", "delete": ["b"]}]}),
    # T2 (second stage of the pipelined region) fails once -> T1, T2 and U re-run, S does not
    "pipelined_t2_fails": ("ft_e2e_pipelined", {"ft_faults": [{"task": "T2", "times": 1}]}),
    # T2's task process is SIGKILLed after its Spark job, before the commit (on the Connect server,
    # where t1 is held by the server; the run above covers the same region on spark-submit)
    "pipelined_t2_killed": ("ft_e2e_pipelined_connect", {"ft_faults": [{"task": "T2", "mode": "kill"}]}),
    # T2 fails, the strategy gives up: the run's end drops the view of t1 that nobody consumed
    "connect_run_fails": ("ft_e2e_run_end", {"ft_faults": [{"task": "T2", "times": 99}]}),
    # sink[1] finds raw[1] corrupt -> read[1] and sink[1] re-run, index 0 untouched
    "mapped_index_1": ("ft_e2e_mapped", {"ft_faults": [{"task": "sink[1]", "delete": ["raw[1]"]}]}),
    "fixed_delay": ("ft_e2e_fixed_delay", {"ft_faults": [{"task": "F", "times": 99}]}),
    "exponential": ("ft_e2e_exponential", {"ft_faults": [{"task": "F", "times": 99}]}),
    "failure_rate": ("ft_e2e_failure_rate", {"ft_faults": [{"task": "F", "times": 99}]}),
    # every exchange shape (tests/e2e/test_exchange_matrix.py): failure-free, and the first consumer
    # task of every shape failing once
    "matrix_clean": ("ft_e2e_exchange_matrix", {"ft_faults": []}),
    "matrix_faults": (
        "ft_e2e_exchange_matrix",
        {
            "ft_faults": [
                {"task": f"C_{shape}" if consumers == 1 else f"C_{shape}[0]", "times": 1}
                for shape, (_, _, consumers, _) in MATRIX_SHAPES.items()
            ]
        },
    ),
}


class ScenarioRuns:
    def __init__(self, live_airflow) -> None:
        self.live_airflow = live_airflow
        self.stamp = datetime.now().strftime("%H%M%S")
        self.started: dict[str, tuple[str, str]] = {}

    def start(self, names: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Trigger the scenarios not started yet; (dag id, run id) of each asked for."""
        names = list(names)
        todo = [n for n in names if n not in self.started]
        if todo:
            self.live_airflow.wait_for_dags({SCENARIOS[n][0] for n in todo}, timeout=120)
        for name in todo:
            dag_id, conf = SCENARIOS[name]
            run_id = f"{name}__{self.stamp}"
            self.live_airflow.client.trigger_dag_run(dag_id, conf, run_id=run_id)
            self.started[name] = (dag_id, run_id)
        return {n: self.started[n] for n in names}


@pytest.fixture(scope="session")
def scenario_runs(live_airflow) -> ScenarioRuns:
    return ScenarioRuns(live_airflow)
