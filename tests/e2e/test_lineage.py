"""OpenLineage events of runs with a restart, as a lineage tool receives them: the session's live Airflow
emits them through the openlineage provider's HTTP transport to a real listener
(ft_harness/services/lineage_listener.py). Two runs of the region-failover scenarios are read:

    S --s--> [ T1 ~~t1 (pipelined)~~> T2 (fails once) ] --t2--> U      (spark-submit)
    A --a--> B --b--> C (b deleted before C reads it), D               (backtracking)
"""

from __future__ import annotations

import pytest

from airflow_ft_provider.partitions import RunRef, S3PartitionStore
from ft_harness.airflow.airflow_rest import try_numbers
from ft_harness.chaos.scenario_runs import SCENARIOS

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.s3]

PIPELINED, BACKTRACKING = "pipelined_t2_fails", "seed002_b_lost"


@pytest.fixture(scope="module")
def runs(scenario_runs):
    return scenario_runs.start(SCENARIOS)  # shared with test_region_failover.py: started once


@pytest.fixture(scope="module")
def store(s3_endpoint, e2e_store_url):
    return S3PartitionStore(s3_endpoint.client(), e2e_store_url)


def tries(events, run_id):
    """(task, try number) -> the run's task-level events of that try, keyed by event type."""
    found: dict[tuple[str, int], dict[str, dict]] = {}
    for event in events:
        facets = event["run"].get("facets", {})
        ti = facets.get("airflow", {}).get("taskInstance")
        if not ti or facets.get("airflow", {}).get("dagRun", {}).get("run_id") != run_id:
            continue
        task = event["job"]["name"].split(".", 1)[1]
        found.setdefault((task, ti["try_number"]), {})[event["eventType"]] = event
    return found


def finished(live_airflow, lineage_listener, runs, name, expected):
    """The run's events, once every try in ``expected`` has reported its end."""
    dag_id, run_id = runs[name]
    run = live_airflow.client.wait_for_dag_run(dag_id, run_id, timeout=1100)
    assert run["state"] == "success", live_airflow.describe_run(dag_id, run_id)
    events = lineage_listener.wait_for(
        dag_id,
        lambda es: all({"COMPLETE", "FAIL"} & set(tries(es, run_id).get(t, {})) for t in expected),
    )
    return dag_id, run_id, tries(events, run_id)


def ft_try(event):
    return event["run"]["facets"]["ftTry"]


def end(events):
    return events.get("COMPLETE") or events["FAIL"]


def test_a_region_restart_s_events_say_why_each_try_ran_and_which_try_it_replaces(
    live_airflow, lineage_listener, runs, store
):
    expected = [("S", 1), ("T1", 1), ("T1", 2), ("T2", 1), ("T2", 2), ("U", 1)]
    dag_id, run_id, found = finished(live_airflow, lineage_listener, runs, PIPELINED, expected)
    first_t2, second_t2 = found[("T2", 1)], found[("T2", 2)]
    assert "FAIL" in first_t2 and "COMPLETE" in second_t2
    failed = ft_try(first_t2["FAIL"])
    assert (failed["tryNumber"], failed["cause"], failed["outcome"]) == (1, "first_try", "failed")
    assert "replacesRunId" not in failed
    facet = ft_try(second_t2["COMPLETE"])
    # the try it replaces is the failed one, by the run id its own events carried
    assert facet["replacesRunId"] == first_t2["FAIL"]["run"]["runId"] != second_t2["COMPLETE"]["run"]["runId"]
    assert (facet["cause"], facet["failedTask"], facet["outcome"]) == ("region_restart", "T2", "computed")
    t1 = ft_try(end(found[("T1", 2)]))  # restarted with T2: one pipelined region
    assert (t1["cause"], t1["failedTask"], t1["replacesRunId"]) == (
        "region_restart",
        "T2",
        end(found[("T1", 1)])["run"]["runId"],
    )
    assert ft_try(end(found[("S", 1)]))["cause"] == "first_try" and ("S", 2) not in found

    # datasets are the partitions, by their keys in the bucket, with the attempt read or written
    run = RunRef(dag_id, run_id)
    s_manifest, t2_manifest = store.manifest(run.parse("s")), store.manifest(run.parse("t2"))
    [s_out] = end(found[("S", 1)])["outputs"]
    [t1_in] = end(found[("T1", 2)])["inputs"]
    [u_in] = end(found[("U", 1)])["inputs"]
    namespace = f"s3://{store.layout.bucket}"
    assert (s_out["namespace"], s_out["name"]) == (
        namespace,
        store.layout.partition_prefix(run.parse("s"))[:-1],
    )
    assert (t1_in["namespace"], t1_in["name"]) == (s_out["namespace"], s_out["name"])
    assert (
        t1_in["facets"]["ftPartition"]["attempt"]
        == s_manifest.attempt_id
        == s_out["facets"]["ftPartition"]["attempt"]
    )
    assert s_out["outputFacets"]["outputStatistics"]["rowCount"] == s_manifest.row_count == 40
    assert u_in["facets"]["ftPartition"] | {"_producer": "", "_schemaURL": ""} == {
        "_producer": "",
        "_schemaURL": "",
        "partitionId": "t2",
        "type": "blocking",
        "attempt": t2_manifest.attempt_id,
        "producerTry": 2,  # the restarted T2's output, not the failed try's
    }
    [t1_out] = end(found[("T1", 2)])["outputs"]  # the pipelined exchange inside the region
    [t2_in] = end(found[("T2", 2)])["inputs"]
    assert t1_out["name"] == t2_in["name"] and t1_out["facets"]["ftPartition"]["type"] == "pipelined"

    # the spark-submit application of the restarted try was handed that try as its parent job
    log = live_airflow.client.task_log(dag_id, run_id, "T2", 2)
    assert f"openlineage parent run: {second_t2['COMPLETE']['run']['runId']}" in log


def test_backtracking_s_events_name_the_lost_partition_the_restarted_producer_rebuilt(
    live_airflow, lineage_listener, runs
):
    dag_id, run_id = runs[BACKTRACKING]
    live_airflow.client.wait_for_dag_run(dag_id, run_id, timeout=1100)
    final = try_numbers(live_airflow.client.task_instances(dag_id, run_id))  # task -> its last try
    expected = [("B", 1), ("B", final["B"]), ("C", final["C"]), ("D", final["D"])]
    _, _, found = finished(live_airflow, lineage_listener, runs, BACKTRACKING, expected)
    rebuilt = ft_try(end(found[("B", final["B"])]))
    assert (rebuilt["cause"], rebuilt["lostPartitions"]) == ("backtracking", ["b"]), rebuilt
    # C deletes b and fails on it; D reads b too and may find it lost first (test_region_failover.py)
    decider = rebuilt["failedTask"]
    assert decider in ("C", "D"), rebuilt
    assert rebuilt["replacesRunId"] == end(found[("B", 1)])["run"]["runId"]
    retried = ft_try(end(found[(decider, 2)]))
    assert (retried["cause"], retried["failedTask"]) == ("region_restart", decider), retried
    [b_out] = end(found[("B", final["B"])])["outputs"]
    [c_in] = end(found[("C", final["C"])])["inputs"]
    assert c_in["facets"]["ftPartition"]["attempt"] == b_out["facets"]["ftPartition"]["attempt"]
    assert c_in["facets"]["ftPartition"]["producerTry"] == final["B"] == 2
