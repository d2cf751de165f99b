"""What the failover core decides for the ETL pipeline of the examples, printed step by step.

Until the full demo (a live Airflow run with an injected failure) exists, the demo command runs this:
it builds the pipeline graph, computes its failover regions and the restart sets of a few failures,
and simulates the exponential-delay restart schedule on a manual clock.
"""

from __future__ import annotations

import random

from airflow_ft_provider.failover import (
    DistributionPattern,
    ManualClock,
    RestartAllFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
    ResultPartitionType,
    StageGraph,
    load_restart_strategy,
)

BLOCKING, PIPELINED = ResultPartitionType.BLOCKING, ResultPartitionType.PIPELINED

PIPELINE = """
  extract_orders[0..3] --raw (blocking, pointwise)--> clean_orders[0..3]
  clean_orders --cleaned (blocking, all-to-all)--> [ enrich --enriched (pipelined)--> score ]
  score --scored (blocking)--> daily_revenue
                          \\--> customer_aggregates
"""


def build_pipeline() -> StageGraph:
    graph = StageGraph()
    graph.add_stage("extract_orders", 4)
    graph.add_stage("clean_orders", 4)
    for stage in ("enrich", "score", "daily_revenue", "customer_aggregates"):
        graph.add_stage(stage)
    graph.add_result("raw", "extract_orders", BLOCKING)
    graph.add_result("cleaned", "clean_orders", BLOCKING)
    graph.add_result("enriched", "enrich", PIPELINED)
    graph.add_result("scored", "score", BLOCKING)
    graph.consume("clean_orders", "raw", DistributionPattern.POINTWISE)
    graph.consume("enrich", "cleaned")
    graph.consume("score", "enriched")
    graph.consume("daily_revenue", "scored")
    graph.consume("customer_aggregates", "scored")
    return graph


def show_failure(strategy, full, failed: str, unavailable: list[str], why: str) -> None:
    regions = strategy.regions_to_restart(failed, unavailable)
    tasks = strategy.tasks_to_restart(failed, unavailable)
    print(f"\n* {failed} fails{f', partitions lost: {unavailable}' if unavailable else ''} ({why})")
    for region in regions:
        print(f"    restart region {sorted(region)}")
    total = len(full.tasks_to_restart(failed))
    print(f"    {len(tasks)} of {total} tasks re-run (full restart: {total})")


def main() -> None:
    graph = build_pipeline()
    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    full = RestartAllFailoverStrategy(graph)
    print("Pipeline:" + PIPELINE)
    print(f"{len(strategy.regions)} failover regions:")
    for region in strategy.regions:
        print(f"    {sorted(region)}")

    show_failure(strategy, full, "customer_aggregates", [], "its input 'scored' is intact")
    show_failure(strategy, full, "score", [], "pipelined region: enrich restarts too; consumers follow")
    show_failure(strategy, full, "clean_orders[2]", [], "one shard of the pointwise stage")
    show_failure(
        strategy,
        full,
        "daily_revenue",
        ["scored", "raw[1]"],
        "backtracking: 'scored' is gone, so its producer region re-runs; raw[1] is not needed",
    )

    config = {
        "restart-strategy.type": "exponential-delay",
        "restart-strategy.exponential-delay.initial-backoff": "1 s",
        "restart-strategy.exponential-delay.backoff-multiplier": "2",
        "restart-strategy.exponential-delay.max-backoff": "10 s",
        "restart-strategy.exponential-delay.jitter-factor": "0.1",
        "restart-strategy.exponential-delay.attempts-before-reset-backoff": "6",
    }
    clock = ManualClock()
    restart = load_restart_strategy(config, clock=clock, rng=random.Random(2026))
    print(f"\nRestart strategy {restart!r}")
    for failure in range(1, 8):
        restart.notify_failure()
        if not restart.can_restart():
            print(f"    failure {failure} at t={clock.now():6.2f} s: Recovery is suppressed by {restart!r}")
            break
        delay = restart.backoff_seconds()
        print(f"    failure {failure} at t={clock.now():6.2f} s: restart after {delay:5.2f} s")
        clock.advance(delay + 0.5)


if __name__ == "__main__":
    main()
