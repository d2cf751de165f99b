"""The failover page's data, built from plain values (no Airflow, no S3)."""

from airflow_ft_provider.failover import ManualClock, ResultPartitionType
from airflow_ft_provider.failover.failure_handler import ExecutionFailureHandler, FailoverState, Failure
from airflow_ft_provider.failover.strategy_state import state_to_json
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.partitions import RunRef
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.partitions.manifest import FileEntry, Manifest, Producer
from airflow_ft_provider.partitions.store import AvailabilityReport, UnavailablePartition
from airflow_ft_provider.plugins.run_view import build_run_view
from airflow_ft_provider.recovery.journal_schema import decision_fields, event_from_json
from airflow_ft_provider.recovery.wording import decision_reason

FIXED = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 3,
    "restart-strategy.fixed-delay.delay": "10 s",
}


def pipeline() -> PipelineDescription:
    #   extract --raw--> [ enrich ~~rich (pipelined)~~> score ] --scores--> report
    #                \--raw--> audit
    return PipelineDescription(
        "etl",
        [
            StageDeclaration("extract", 1, (), (Output("raw"),)),
            StageDeclaration("enrich", 1, (Input("raw"),), (Output("rich", ResultPartitionType.PIPELINED),)),
            StageDeclaration("score", 1, (Input("rich"),), (Output("scores"),)),
            StageDeclaration("report", 1, (Input("scores"),), ()),
            StageDeclaration("audit", 1, (Input("raw"),), (Output("audited"),)),
        ],
        restart_config=FIXED,
    )


def manifest(result: str, try_number: int) -> Manifest:
    return Manifest(
        pipeline="etl",
        run_id="r1",
        result=result,
        map_index=-1,
        kind="blocking",
        attempt_id=f"t{try_number}-abc",
        producer=Producer("extract", -1, try_number),
        files=(
            FileEntry("part-0.parquet", 1000, "crc32c:AAAAAA=="),
            FileEntry("part-1.parquet", 24, "crc32c:AAAAAA=="),
        ),
        format="parquet",
        compression="snappy",
        row_count=40,
        created_at=1_700_000_000.0,
    )


def test_view_of_a_run_with_one_failover():
    description = pipeline()
    clock = ManualClock(1_700_000_100.0)
    state = FailoverState()
    core = ExecutionFailureHandler(description.failover_strategy(), FIXED, clock=clock)
    decision = core.handle(state, Failure("score", 1, "RuntimeError: boom"))
    events = [
        {
            "time": clock.now(),
            "kind": "failover",
            "task": "score",
            **decision_fields(decision),
            "reason": decision_reason(decision),
            "cleared": ["enrich"],
            "strategy_state": state_to_json(state.strategies["run"]),
        }
    ]
    report = AvailabilityReport(
        RunRef("etl", "r1"),
        available=frozenset({"raw"}),
        unavailable={
            "scores": UnavailablePartition("scores", Unavailable.MISSING_MANIFEST),
            "audited": UnavailablePartition("audited", Unavailable.CHECKSUM_MISMATCH, "part-0 has crc32c:x"),
            "rich": UnavailablePartition("rich", Unavailable.PIPELINED),
        },
        manifests={"raw": manifest("raw", 2)},
    )
    instances = [
        {"task_id": "extract", "map_index": -1, "state": "success", "try_number": 2},
        {"task_id": "enrich", "map_index": -1, "state": "running", "try_number": 2},
        {"task_id": "score", "map_index": -1, "state": "up_for_retry", "try_number": 1},
        {"task_id": "audit", "map_index": -1, "state": "success", "try_number": 1},
    ]
    view = build_run_view(
        description,
        "r1",
        task_instances=instances,
        state=state,
        events=[event_from_json(e) for e in events],
        report=report,
        clock=clock,
    )

    assert [r["tasks"] for r in view["regions"]] == [["audit"], ["enrich", "score"], ["extract"], ["report"]]
    region = next(r for r in view["regions"] if r["id"] == "enrich")
    assert region["restart_not_before"] == clock.now() + 10
    assert region["states"] == ["running", "up_for_retry"]
    tasks = {t["id"]: t for t in view["tasks"]}
    assert tasks["report"]["state"] == "no status" and tasks["score"]["region"] == "enrich"
    assert {(e["from"], e["to"], e["type"]) for e in view["edges"]} == {
        ("extract", "enrich", "blocking"),
        ("enrich", "score", "pipelined"),
        ("score", "report", "blocking"),
        ("extract", "audit", "blocking"),
    }

    partitions = {p["id"]: p for p in view["partitions"]}
    assert partitions["raw"] | {"reason": ""} == partitions["raw"]
    assert (
        partitions["raw"]["status"],
        partitions["raw"]["size"],
        partitions["raw"]["rows"],
        partitions["raw"]["files"],
        partitions["raw"]["producer_try"],
    ) == ("committed", 1024, 40, 2, 2)
    assert partitions["scores"]["status"] == "pending"  # its producer has not succeeded: not lost
    assert (
        partitions["audited"]["status"] == "corrupt"
        and "part-0 has crc32c:x" in partitions["audited"]["reason"]
    )
    assert partitions["rich"]["status"] == "pipelined"

    [event] = view["history"]
    assert (event["task"], event["cause"], event["regions"], event["delay"], event["restart"]) == (
        "score",
        "RuntimeError: boom",
        [["enrich", "score"], ["report"]],
        10.0,
        True,
    )
    assert event["strategy_state"] == {"type": "fixed-delay", "failures": 1}
    assert view["strategy"]["restart_strategy"] == "FixedDelay(attempts=3, delay=10 s)"
    assert view["strategy"]["scopes"] == [
        {
            "scope": "run",
            "budget": "2 of 3 restarts left (1 failures so far)",
            "state": {"type": "fixed-delay", "failures": 1},
        }
    ]


def test_a_missing_manifest_after_success_is_lost_and_an_unreadable_store_is_said():
    description = pipeline()
    instances = [{"task_id": "extract", "map_index": -1, "state": "success", "try_number": 1}]
    report = AvailabilityReport(
        RunRef("etl", "r1"), frozenset(), {"raw": UnavailablePartition("raw", Unavailable.MISSING_MANIFEST)}
    )
    view = build_run_view(
        description, "r1", task_instances=instances, state=FailoverState(), events=[], report=report
    )
    assert next(p for p in view["partitions"] if p["id"] == "raw")["status"] == "missing"
    assert view["strategy"]["scopes"][0]["budget"].startswith("3 of 3 restarts left")

    blind = build_run_view(
        description, "r1", task_instances=instances, state=FailoverState(), events=[], report=None
    )
    assert {p["status"] for p in blind["partitions"] if p["type"] == "blocking"} == {"unknown"}
    assert "could not be read" in blind["partitions"][0]["reason"]


def view_of(events):
    """The page's data for run r1 of the test pipeline with nothing but ``events`` known."""
    return build_run_view(
        pipeline(),
        "r1",
        task_instances=[],
        state=FailoverState(),
        report=None,
        events=[event_from_json(e) for e in events],
    )


def test_manual_restart_events_show_who_and_why():
    view = view_of(
        [
            {
                "time": 5.0,
                "kind": "manual",
                "task": "enrich",
                "reason": "restart region from the failover page by ada",
                "regions": [["enrich", "score"], ["report"]],
                "tasks": ["enrich", "report", "score"],
                "cleared": ["enrich", "score"],
                "user": "ada",
            }
        ],
    )
    [event] = view["history"]
    assert (event["kind"], event["user"], event["delay"], event["regions"]) == (
        "manual",
        "ada",
        0.0,
        [["enrich", "score"], ["report"]],
    )
    assert event["cause"] == "restart region from the failover page by ada"


def test_checkpointed_tasks_show_their_statistics_and_every_try_s_restore_point():
    restore = {"time": 1.0, "kind": "checkpoint", "task": "score", "restored_via": None}
    stats = {"time": 2.0, "kind": "checkpoints", "task": "score", "failed": 0, "last_duration": 0.25}
    view = view_of(
        iter(  # read once, as the journal hands them over
            [
                {**restore, "try_number": 1, "restored_from": None, "reason": "score try 1 starts fresh"},
                {
                    **stats,
                    "try_number": 1,
                    "succeeded": False,
                    "completed": 3,
                    "last_completed": 2,
                    "last_size": 4096,
                    "last_incremental_size": 1024,
                    "processed_bytes": 30,
                    "total_bytes": 80,
                    "reason": "score try 1 failed: 3 checkpoints completed, 0 failed",
                },
                {
                    **restore,
                    "try_number": 2,
                    "restored_from": 2,
                    "restored_via": "store",
                    "reason": "score try 2 resumed at checkpoint 2",
                },
                {
                    **stats,
                    "try_number": 2,
                    "succeeded": True,
                    "completed": 5,
                    "last_completed": 7,
                    "last_size": 9000,
                    "last_incremental_size": 800,
                    "processed_bytes": 80,
                    "total_bytes": 80,
                    "reason": "score try 2 succeeded: 5 checkpoints completed, 0 failed",
                },
            ]
        ),  # fmt: skip
    )
    [row] = view["checkpoints"]
    assert (row["task"], row["try_number"], row["succeeded"], row["completed"], row["last_completed"]) == (
        "score", 2, True, 5, 7
    )  # fmt: skip
    assert (row["last_size"], row["last_incremental_size"], row["progress"]) == (9000, 800, 1.0)
    assert [(r["try_number"], r["restored_from"], r["restored_via"]) for r in row["restores"]] == [
        (1, None, None),
        (2, 2, "store"),
    ]
    assert [h["cause"] for h in view["history"]][1] == "score try 1 failed: 3 checkpoints completed, 0 failed"


def test_a_reused_try_is_in_the_history_in_words():
    said = "inputs identical to try 1's: output of try 1 reused, Spark not started"
    view = view_of(
        iter([{"time": 1.0, "kind": "reused", "task": "score", "try_number": 2, "reason": said}]),
    )
    [row] = view["history"]
    assert (row["kind"], row["task"], row["try_number"], row["cause"]) == ("reused", "score", 2, said)
    assert row["decision"] == ""  # not "fail: ...": reusing an output decides no restart


def test_partitions_whose_manifests_are_not_read_yet_are_listed_and_counted_for_the_page_to_ask_again():
    report = AvailabilityReport(
        RunRef("etl", "r1"),
        available=frozenset({"raw"}),
        unavailable={"rich": UnavailablePartition("rich", Unavailable.PIPELINED)},
        manifests={"raw": manifest("raw", 1)},
        pending=frozenset({"scores", "audited"}),
    )
    view = build_run_view(
        pipeline(), "r1", task_instances=[], state=FailoverState(), events=[], report=report
    )
    rows = {p["id"]: p for p in view["partitions"]}
    assert {pid: rows[pid]["status"] for pid in ("raw", "scores", "audited")} == {
        "raw": "committed",
        "scores": "listed",
        "audited": "listed",
    }
    assert rows["scores"]["rows"] is None and rows["raw"]["rows"] is not None
    assert view["partitions_pending"] == 2


def test_a_run_shows_the_stages_mapped_over_run_time_values_once_counted_and_says_which_are_not():
    #   files (a task) --> parse[?] --parsed--> report
    def mapped(**counts):
        return PipelineDescription(
            "files",
            [
                StageDeclaration("parse", 1, (), (Output("parsed"),), mapped=True, expands_at_run_time=True),
                StageDeclaration("report", 1, (Input("parsed"),), ()),
            ],
            restart_config=FIXED,
            map_counts=counts,
        )

    def view(description):
        return build_run_view(
            description, "r1", task_instances=[], state=FailoverState(), events=[], report=None
        )

    before = view(mapped())
    assert before["not_expanded"] == ["parse", "report"] and before["stages"] == []
    after = view(mapped(parse=3))
    assert after["not_expanded"] == []
    assert [s["tasks"] for s in after["stages"]] == [["parse[0]", "parse[1]", "parse[2]"], ["report"]]
    assert {t["id"]: t["map_index"] for t in after["tasks"]}["parse[2]"] == 2
