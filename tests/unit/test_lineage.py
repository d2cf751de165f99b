"""A try's lineage in OpenLineage's terms (lineage.py, lineage_facets.py), serialized as the provider's
HTTP transport sends it. The live run of tests/e2e/test_lineage.py checks what the events say."""

from __future__ import annotations

from openlineage.client.serde import Serde

from airflow_ft_provider.lineage import Outcome, PartitionLineage, TryLineage, _outcome, operator_lineage
from airflow_ft_provider.recovery.try_cause import Cause, TryCause
from airflow_ft_provider.stage_try.entries import PartitionEntry

READ = PartitionLineage("s", "blocking", "p/dag/run/blocking/s/0", "att-s", 1, 40, 1200, 2)
HANDLE = PartitionLineage("t1", "pipelined", "p/dag/run/pipelined/t1/0", None, None, None, None, None)
WRITTEN = PartitionLineage("t2", "blocking", "p/dag/run/blocking/t2/0", "att-t2", 2, 40, 900, 1)


def lineage(**changes):
    values = {
        "bucket": "lake",
        "try_number": 2,
        "cause": TryCause(Cause.REGION_RESTART, "T2 failed: boom", failed_task="T2"),
        "outcome": Outcome.COMPUTED,
        "inputs": (READ, HANDLE),
        "outputs": (WRITTEN,),
        "replaces_run_id": "0190-try-1",
    }
    return TryLineage(**{**values, **changes})


def test_partitions_are_datasets_of_the_bucket_with_their_attempt_and_row_count():
    ol = operator_lineage(lineage())
    [read, handle] = [Serde.to_dict(d) for d in ol.inputs]
    [written] = [Serde.to_dict(d) for d in ol.outputs]
    assert (read["namespace"], read["name"]) == ("s3://lake", "p/dag/run/blocking/s/0")
    assert read["facets"]["ftPartition"]["attempt"] == "att-s"
    assert read["facets"]["ftPartition"]["_schemaURL"].endswith("#openlineage-facets-ftPartition")
    assert read["inputFacets"]["inputStatistics"] | {"_producer": "", "_schemaURL": ""} == {
        "rowCount": 40,
        "size": 1200,
        "fileCount": 2,
        "_producer": "",
        "_schemaURL": "",
    }
    assert handle["facets"]["ftPartition"]["type"] == "pipelined" and not handle["inputFacets"]
    assert written["outputFacets"]["outputStatistics"]["rowCount"] == 40
    assert written["facets"]["ftPartition"]["producerTry"] == 2


def test_the_try_facet_says_why_the_try_ran_and_which_it_replaces_and_leaves_out_what_is_unknown():
    facet = Serde.to_dict(operator_lineage(lineage()).run_facets["ftTry"])
    assert {k: v for k, v in facet.items() if not k.startswith("_")} == {
        "tryNumber": 2,
        "cause": "region_restart",
        "reason": "T2 failed: boom",
        "outcome": "computed",
        "replacesRunId": "0190-try-1",
        "failedTask": "T2",
    }
    assert facet["_producer"].startswith("https://pypi.org/project/airflow-ft-provider/")
    first = lineage(try_number=1, cause=TryCause(Cause.FIRST, "first"), replaces_run_id=None, outputs=())
    assert "replacesRunId" not in Serde.to_dict(operator_lineage(first).run_facets["ftTry"])


def test_how_a_try_came_by_its_outputs():
    entry = PartitionEntry("blocking", 40, 1, 900, "att")
    assert _outcome([entry], failed=False)[0] is Outcome.COMPUTED
    assert _outcome([entry], failed=True)[0] is Outcome.FAILED
    reused = PartitionEntry("blocking", 40, 1, 900, "att", reused_from_try=1, reused_from_run="r0")
    assert _outcome([reused], failed=False) == (Outcome.REUSED, 1, "r0", None)
    adopted = PartitionEntry("blocking", 40, 1, 900, "att", adopted_from_try=1)
    assert _outcome([adopted], failed=False) == (Outcome.ADOPTED, 1, None, None)
    resumed = entry.with_checkpoint({"restored_from": 3})
    assert _outcome([resumed], failed=False) == (Outcome.RESUMED, None, None, 3)
