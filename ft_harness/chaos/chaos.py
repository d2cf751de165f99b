"""Chaos runs in a live Airflow: seeded random faults, checked outcomes. The pipelines are in
``pipelines.py``: ``ft_example_orders_etl`` (below) and ``ft_example_daily_files`` (stages mapped over
an upstream task's output, counted at run time).

    generate_orders --raw_orders--> [clean_orders ~~cleaned_orders~~> enrich_orders] --enriched_orders--+--> daily_revenue
                                                                                                     +--> customer_aggregates

A plan (from a seeded ``random.Random``) injects 1-3 faults through the run's ``ft_faults`` --
exceptions before or inside the Spark application (``raise``/``app``, on 1-2 tries), SIGKILL of the
task process after its Spark work (``kill``), deleted or truncated data objects of a blocking
partition just before a consumer reads it -- and, with an S3 proxy, may cut S3 off for a few seconds
while the run is in flight; with a Spark Connect server, it may kill and restart the server mid-run
(``server loss``: running stages fail, pipelined partitions held by the server are lost, blocking
partitions in S3 survive). Optionally a plan also gets a persistent fault (a stage that fails on
every try), which must exhaust the restart strategy. The verdict of a finished run is one of:

* ``recovered``: success, final partitions equal to the failure-free output, every committed partition
  of the run intact (deep check: objects present, sizes and checksums match the manifests);
* ``suppressed``: failed, and the recovery journal says why ("Recovery is suppressed by ...");
* anything else is a finding: ``wrong data``, ``damaged partition`` or ``unexplained failure``.

Used by tests/chaos (a short bounded sequence) and bench/bench_chaos.py (longer, prints counts).
"""  # noqa: E501  (a drawing)

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.recovery.journal import RecoveryJournal
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.chaos.pipelines import ORDERS, ChaosPipeline
from ft_harness.data.journal_records import stored_events

PERSISTENT_TRIES = 99  # more tries than any restart strategy of the example allows


@dataclass
class ChaosPlan:
    faults: list[dict[str, Any]]
    pipeline: ChaosPipeline = ORDERS
    outage_after: float | None = None  # seconds after the trigger
    outage_seconds: float = 0.0
    server_loss_after: float | None = None  # seconds after the trigger: the Spark Connect server restarts

    @property
    def persistent(self) -> bool:
        """A stage fails on every try: only a suppressed run is a correct outcome."""
        return any(f.get("times", 1) >= PERSISTENT_TRIES for f in self.faults)

    def describe(self) -> str:
        outage = (
            f", S3 down {self.outage_seconds:.1f} s at +{self.outage_after:.0f} s"
            if self.outage_after
            else ""
        )
        loss = (
            f", Spark Connect server lost at +{self.server_loss_after:.0f} s"
            if self.server_loss_after
            else ""
        )
        return f"{self.faults}{outage}{loss}"


def make_plan(
    rng: random.Random,
    *,
    outages: bool,
    persistent: float = 0.0,
    server_losses: float = 0.0,
    pipeline: ChaosPipeline = ORDERS,
) -> ChaosPlan:
    """``persistent``: the probability of adding a fault that fails one stage on every try;
    ``server_losses``: the probability of losing the Spark Connect server while the run is in flight."""
    faults = []
    inputs = pipeline.blocking_inputs
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("raise", "app", "kill", "delete", "truncate"))
        if kind in ("delete", "truncate"):
            consumer = rng.choice(sorted(inputs))
            faults.append({"task": consumer, kind: [inputs[consumer]]})
        else:
            faults.append(
                {
                    "task": rng.choice(pipeline.stages),
                    "mode": kind,
                    "times": 1 if kind == "kill" else rng.randint(1, 2),
                }
            )
    if persistent and rng.random() < persistent:  # no draw when off: seeded plans stay as they were
        faults.append({"task": rng.choice(pipeline.stages), "mode": "raise", "times": PERSISTENT_TRIES})
    plan = ChaosPlan(faults, pipeline)
    if outages and rng.random() < 0.5:
        plan.outage_after, plan.outage_seconds = rng.uniform(5, 40), rng.uniform(2, 5)
    if server_losses and rng.random() < server_losses:  # no draw when off: seeded plans stay as they were
        plan.server_loss_after = rng.uniform(10, 60)
    return plan


@dataclass
class Verdict:
    run_id: str
    plan: ChaosPlan
    outcome: str
    detail: str = ""
    tries: dict[str, int] = field(default_factory=dict)


def run_plans(
    live_airflow,
    store,
    plans: list[ChaosPlan],
    *,
    proxy=None,
    spark_connect=None,
    prefix: str = "chaos",
    timeout: float = 1500,
) -> list[Verdict]:
    """Trigger one run per plan (all at once), play the outages and server losses, wait, judge every run."""
    api = live_airflow.client
    live_airflow.wait_for_dags({plan.pipeline.dag_id for plan in plans}, timeout=120)
    stamp = time.strftime("%H%M%S")
    run_ids = []
    for n, plan in enumerate(plans):
        run_id = f"{prefix}_{n}__{stamp}"
        api.trigger_dag_run(
            plan.pipeline.dag_id, {**plan.pipeline.conf, "ft_faults": plan.faults}, run_id=run_id
        )
        run_ids.append(run_id)
    outages = [
        threading.Timer(p.outage_after, proxy.outage, args=(p.outage_seconds,))
        for p in plans
        if p.outage_after and proxy is not None
    ]
    outages += [
        threading.Timer(p.server_loss_after, spark_connect.restart)
        for p in plans
        if p.server_loss_after and spark_connect is not None
    ]
    for timer in outages:
        timer.daemon = True
        timer.start()
    verdicts = [
        judge(live_airflow, store, run_id, plan, timeout) for run_id, plan in zip(run_ids, plans, strict=True)
    ]
    for timer in outages:
        timer.join()
    return verdicts


def judge(live_airflow, store, run_id: str, plan: ChaosPlan, timeout: float) -> Verdict:
    api, dag_id = live_airflow.client, plan.pipeline.dag_id
    state = api.wait_for_dag_run(dag_id, run_id, timeout=timeout, poll=2)["state"]
    verdict = Verdict(run_id, plan, "", tries=try_numbers(api.task_instances(dag_id, run_id)))
    run = RunRef(dag_id, run_id)
    if state == "failed":
        refusals = [
            e
            for e in stored_events(RecoveryJournal(store, run))
            if e.get("kind") == "failover" and not e["restart"]
        ]
        if refusals and refusals[-1]["reason"].startswith("Recovery is suppressed by"):
            verdict.outcome, verdict.detail = "suppressed", refusals[-1]["reason"]
        else:
            verdict.outcome = "unexplained failure"
            verdict.detail = live_airflow.describe_run(dag_id, run_id)
    report = store.check_availability(dag_id, run_id, plan.pipeline.blocking, deep=True)
    damaged_on_purpose = {p for f in plan.faults for p in (*f.get("delete", ()), *f.get("truncate", ()))}
    half_written = {
        p: u
        for p, u in report.unavailable.items()
        if u.reason is not Unavailable.MISSING_MANIFEST
        and (state == "success" or p not in damaged_on_purpose)
    }
    if state == "failed":
        if half_written:  # a failed run may leave partitions uncommitted, never committed and broken
            verdict.outcome, verdict.detail = "damaged partition", _describe(half_written)
        return verdict
    if plan.persistent:  # a stage failing on every try cannot have produced this run's output
        verdict.outcome, verdict.detail = "unexplained failure", "succeeded despite a persistent fault"
        return verdict
    damaged = {p: u for p, u in report.unavailable.items() if not _injected_damage(plan, p, u)}
    if damaged:
        verdict.outcome, verdict.detail = "damaged partition", _describe(damaged)
    elif plan.pipeline.actual(store, run_id) != plan.pipeline.expected():
        verdict.outcome = "wrong data"
    else:
        verdict.outcome = "recovered"
        unread = sorted(set(report.unavailable) - set(damaged))
        verdict.detail = f"damaged on purpose and read from a cached copy: {unread}" if unread else ""
    return verdict


def _injected_damage(plan: ChaosPlan, partition_id: str, unavailable) -> bool:
    """The damage a fault of the plan made, still in S3 after a successful run: a concurrent reader on
    the same worker can cache a verified copy just before the damage, so the consumer that damaged it
    reads that copy and nothing needs to rebuild it (seen in CI: daily_revenue's download in flight
    while customer_aggregates truncated enriched_orders). The run's output is still checked."""
    kinds = {"delete": Unavailable.MISSING_OBJECT, "truncate": Unavailable.SIZE_MISMATCH}
    return any(
        partition_id in fault.get(kind, ()) and unavailable.reason is reason
        for fault in plan.faults
        for kind, reason in kinds.items()
    )


def _describe(unavailable) -> str:
    return "; ".join(f"{p}: {u.reason} {u.detail}" for p, u in unavailable.items())


def count(verdicts: list[Verdict]) -> dict[str, int]:
    faults = sum(len(v.plan.faults) for v in verdicts)
    outages = sum(1 for v in verdicts if v.plan.outage_after)
    server_losses = sum(1 for v in verdicts if v.plan.server_loss_after)
    by_outcome: dict[str, int] = {}
    for v in verdicts:
        by_outcome[v.outcome] = by_outcome.get(v.outcome, 0) + 1
    return {
        "runs": len(verdicts),
        "faults_injected": faults,
        "s3_outages": outages,
        "server_losses": server_losses,
        "persistent_faults": sum(1 for v in verdicts if v.plan.persistent),
        "restarted_tries": sum(n - 1 for v in verdicts for n in v.tries.values() if n > 1),
        "recovered": by_outcome.pop("recovered", 0),
        "suppressed": by_outcome.pop("suppressed", 0),
        "data_mismatches": by_outcome.pop("wrong data", 0),
        "damaged_partitions": by_outcome.pop("damaged partition", 0),
        "unexplained_failures": by_outcome.pop("unexplained failure", 0),
    }
