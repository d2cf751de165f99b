"""RunRecovery's bookkeeping against a real S3 endpoint, with a scripted REST API.

The scheduler-dependent behaviour is tested in a live Airflow (tests/e2e); this file pins down the
races between two failovers that a live run hits only by chance.

    A --a--> B --b--> C          (seed 002, all blocking)
               \\--b--> D
"""

from __future__ import annotations

import dataclasses

import pytest

from airflow_ft_provider.failover import ManualClock
from airflow_ft_provider.failover.decision import TryKey
from airflow_ft_provider.hooks.airflow_api import AirflowApiUnreachable
from airflow_ft_provider.hooks.task_instances import TaskInstanceRow
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output
from airflow_ft_provider.partitions import PartitionNotFound, Producer, RunRef, S3PartitionStore
from airflow_ft_provider.partitions.errors import Unavailable
from airflow_ft_provider.recovery.gate import PENDING_CLEARS_WAIT, RECONCILE_RETRY
from airflow_ft_provider.recovery.pending import UNFINISHED_GRACE, PendingRestart
from airflow_ft_provider.recovery.run_recovery import RunRecovery
from airflow_ft_provider.recovery.try_start import Proceed, Superseded, WaitUntil
from ft_harness.data.journal_records import stored_events

pytestmark = pytest.mark.s3

FIXED = {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": 5,
    "restart-strategy.fixed-delay.delay": "2 s",
}


class ScriptedApi:
    """Answers like the REST API: a listing (possibly stale) and the instances a clear ended."""

    def __init__(self, listing, cleared_tries):
        self.listing = listing
        self.cleared_tries = cleared_tries
        self.clears = []

    def instances(self, dag_id, run_id):
        return [TaskInstanceRow(t, -1, n, s) for t, (s, n) in self.listing.items()]

    def clear_instances(self, dag_id, run_id, keys):
        self.clears.append(sorted(keys))
        return [TaskInstanceRow(t, m, self.cleared_tries[t]) for t, m in keys]

    def try_state(self, dag_id, run_id, task_id, map_index, try_number):
        return "failed"


@pytest.fixture
def seed002(s3_bucket):
    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "store/")
    description = PipelineDescription(
        "seed002",
        [
            StageDeclaration("A", 1, (), (Output("a"),)),
            StageDeclaration("B", 1, (Input("a"),), (Output("b"),)),
            StageDeclaration("C", 1, (Input("b"),), (Output("c"),)),
            StageDeclaration("D", 1, (Input("b"),), (Output("d"),)),
        ],
        restart_config=FIXED,
    )
    return description, store


def test_a_clear_that_ends_a_newer_try_than_listed_supersedes_that_try(seed002):
    description, store = seed002
    # The listing says B is at try 1, but another failover restarted it meanwhile: the clear ends try 2.
    api = ScriptedApi(
        {"A": ("success", 1), "B": ("success", 1), "C": ("failed", 1), "D": ("running", 1)},
        cleared_tries={"B": 2, "D": 1},
    )
    clock = ManualClock(1000.0)
    failover = RunRecovery(description, "r1", store, api=api, clock=clock)
    decision = failover.handle_failure("C", None, 1, PartitionNotFound("b", Unavailable.MISSING_OBJECT))
    assert decision.tasks == {"B", "C", "D"}
    assert api.clears == [[("B", -1), ("D", -1)]]
    state = failover.journal.load()
    assert state.superseded == {"B": 2, "D": 1}
    # B's next try (3) finds try 2 explained: no second, phantom "killed" failover is decided.
    assert failover.before_try("B", None, 3) == WaitUntil(1002.0)
    assert [e["task"] for e in stored_events(failover.journal)] == ["C"]


def test_an_unexplained_previous_failure_is_reconciled_once(seed002):
    description, store = seed002
    api = ScriptedApi(
        {"A": ("success", 1), "B": ("success", 1), "C": ("up_for_retry", 1), "D": ("success", 1)},
        cleared_tries={},
    )
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    # C's try 1 was killed before its policy ran: try 2 applies the failover, exactly once.
    assert failover.before_try("C", None, 2) == WaitUntil(1002.0)
    assert failover.before_try("C", None, 2) == WaitUntil(1002.0)
    [event] = stored_events(failover.journal)
    assert (event["task"], event["try_number"], event["regions"]) == ("C", 1, [["C"]])
    assert "process was killed" in event["cause"]


class NeverStartedApi(ScriptedApi):
    """C's tries 2 and 3 never started (the API server was down: Airflow failed them without a record);
    ``first`` is how its try 1 ended."""

    def __init__(self, listing, first):
        super().__init__(listing, cleared_tries={})
        self.first = first
        self.asked = []

    def try_state(self, dag_id, run_id, task_id, map_index, try_number):
        self.asked.append(try_number)
        return self.first if try_number == 1 else None


def test_tries_that_never_started_are_passed_over_to_the_killed_try_before_them(seed002):
    description, store = seed002
    listing = {"A": ("success", 1), "B": ("success", 1), "C": ("running", 4), "D": ("success", 1)}
    api = NeverStartedApi(listing, first="up_for_retry")
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    # C's try 1 was killed (no recorded failure), tries 2 and 3 never ran: try 4 applies the failover of
    # try 1, once; before, the tries endpoint's 404 for try 3 failed try 4 too
    assert failover.before_try("C", None, 4) == WaitUntil(1002.0)
    assert api.asked == [3, 2, 1]
    [event] = stored_events(failover.journal)
    assert (event["task"], event["try_number"], event["regions"]) == ("C", 1, [["C"]])
    assert "process was killed" in event["cause"]


def test_tries_that_never_started_after_a_success_decide_nothing(seed002):
    description, store = seed002
    listing = {"A": ("success", 1), "B": ("success", 1), "C": ("running", 3), "D": ("success", 1)}
    api = NeverStartedApi(listing, first="success")  # then cleared by hand; tries 2 and 3 never ran
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    assert failover.before_try("C", None, 3) == Proceed()
    assert stored_events(failover.journal) == []


class OutageApi(ScriptedApi):
    """The REST API, unreachable for the listed calls ("instances", "clear_instances") until ``restore()``."""

    def __init__(self, listing, cleared_tries, down_for=()):
        super().__init__(listing, cleared_tries)
        self.down_for = set(down_for)

    def restore(self, listing=None):
        self.down_for = set()
        if listing is not None:
            self.listing = listing

    def instances(self, dag_id, run_id):
        if "instances" in self.down_for:
            raise AirflowApiUnreachable("the API server did not answer")
        return super().instances(dag_id, run_id)

    def clear_instances(self, dag_id, run_id, keys):
        if "clear_instances" in self.down_for:
            raise AirflowApiUnreachable("the API server did not answer")
        return super().clear_instances(dag_id, run_id, keys)

    def try_state(self, dag_id, run_id, task_id, map_index, try_number):
        if "try_state" in self.down_for:
            raise AirflowApiUnreachable("the API server did not answer")
        return super().try_state(dag_id, run_id, task_id, map_index, try_number)


def test_a_restart_whose_clears_met_an_api_outage_is_finished_by_the_next_try(seed002):
    description, store = seed002
    api = OutageApi(
        {"A": ("success", 1), "B": ("success", 1), "C": ("failed", 1), "D": ("running", 1)},
        cleared_tries={"B": 2, "C": 2, "D": 2},
        down_for={"instances", "clear_instances"},
    )
    clock = ManualClock(1000.0)
    failover = RunRecovery(description, "r1", store, api=api, clock=clock)
    # The decision is saved and stands (C retries after the strategy's delay); its clears are not done.
    decision = failover.handle_failure("C", None, 1, PartitionNotFound("b", Unavailable.MISSING_OBJECT))
    assert decision.restart and decision.delay == 2 and decision.tasks == {"B", "C", "D"}
    state = failover.journal.load()
    assert state.handled == {"C": 1} and state.pending[TryKey("C", 1)].tasks == ("B", "D")
    assert state.pending[TryKey("C", 1)].abandoned and api.clears == []
    # C's next try, still in the outage: it waits (deferred) and looks again -- no failure, no count.
    clock.advance(2)
    start = failover.before_try("C", None, 2)
    assert start == WaitUntil(1002.0 + RECONCILE_RETRY, reason=start.reason) and "unreachable" in start.reason
    assert failover.journal.load().handled == {"C": 1}
    # The API is back: the next look finishes the restart, once. B (C's producer) restarts, so this try
    # of C does no work: it is cleared too, and runs again after B.
    api.restore()
    clock.advance(RECONCILE_RETRY)
    assert failover.before_try("C", None, 2) == Superseded("C restarts after B")
    assert api.clears == [[("B", -1), ("D", -1)], [("C", -1)]]
    assert failover.journal.load().pending == {}
    assert failover.before_try("D", None, 2) == Proceed()  # its restart time (1002) has passed
    assert api.clears == [[("B", -1), ("D", -1)], [("C", -1)]]  # nothing cleared twice
    kinds = [(e["kind"], e["task"], e.get("cleared")) for e in stored_events(failover.journal)]
    assert ("failover", "C", []) in kinds and ("reconciled", "C", ["B", "D"]) in kinds


def test_a_killed_try_found_during_an_api_outage_is_handled_once_the_api_answers(seed002):
    description, store = seed002
    # C's try 1 was killed (no recorded failure); learning how it ended needs the REST API.
    api = OutageApi(
        {"A": ("success", 1), "B": ("success", 1), "C": ("up_for_retry", 1), "D": ("success", 1)},
        cleared_tries={},
        down_for={"instances", "clear_instances", "try_state"},
    )
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    assert failover.before_try("C", None, 2).at == 1000.0 + RECONCILE_RETRY
    assert stored_events(failover.journal) == []  # nothing decided on a guess
    api.restore()
    assert failover.before_try("C", None, 2) == WaitUntil(1002.0)
    [event] = stored_events(failover.journal)
    assert (event["task"], event["try_number"]) == ("C", 1)


def test_finishing_a_restart_leaves_alone_a_task_its_lost_clear_did_restart(seed002):
    description, store = seed002
    # The listing worked (B and D at try 1 were to end), the clear's answer was lost: it reached B only.
    api = OutageApi(
        {"A": ("success", 1), "B": ("success", 1), "C": ("failed", 1), "D": ("success", 1)},
        cleared_tries={"B": 2, "D": 2},
        down_for={"clear_instances"},
    )
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    failover.handle_failure("C", None, 1, PartitionNotFound("b", Unavailable.MISSING_OBJECT))
    assert failover.journal.load().pending[TryKey("C", 1)].ended == {"B": 1, "D": 1}
    api.restore({"A": ("success", 1), "B": ("running", 2), "C": ("up_for_retry", 1), "D": ("success", 1)})
    # Whichever try of the run starts first finishes it: here B's new try.
    assert failover.before_try("B", None, 2) == WaitUntil(1002.0)
    assert api.clears == [[("D", -1)]]  # B already runs its new try: only D is cleared
    assert failover.journal.load().pending == {}


def test_a_restart_still_in_its_handlers_hands_is_not_raced_and_a_stale_one_is_finished(seed002):
    description, store = seed002
    # C's handler has decided and not cleared yet (it is still at work, or was killed).
    api = ScriptedApi(
        {"A": ("success", 1), "B": ("success", 1), "C": ("failed", 1), "D": ("running", 1)},
        cleared_tries={"B": 2, "D": 2},
    )
    clock = ManualClock(1000.0)
    failover = RunRecovery(description, "r1", store, api=api, clock=clock)

    def decided_not_cleared(state):
        state.pending[TryKey("C", 1)] = PendingRestart(("B", "D"), decided_at=1000.0)
        state.handled["C"] = 1

    failover.journal.update(decided_not_cleared)
    clock.advance(30)
    failover.before_try("A", None, 1)
    assert api.clears == [] and TryKey("C", 1) in failover.journal.load().pending  # its handler's to finish
    clock.advance(UNFINISHED_GRACE)
    failover.before_try("A", None, 1)  # nobody finished it in the grace period: this try does
    assert api.clears == [[("B", -1), ("D", -1)]] and failover.journal.load().pending == {}


def test_a_restart_another_try_has_taken_over_is_left_to_it(seed002):
    description, store = seed002
    api = ScriptedApi(
        {"A": ("success", 1), "B": ("success", 1), "C": ("failed", 1), "D": ("running", 1)},
        cleared_tries={"B": 2, "D": 2},
    )
    clock = ManualClock(2000.0)
    failover = RunRecovery(description, "r1", store, api=api, clock=clock)

    def taken_over(state):  # abandoned by its handler, then claimed by another try at 1990
        state.pending[TryKey("C", 1)] = PendingRestart(("B", "D"), decided_at=1000.0, claimed_at=1990.0)

    failover.journal.update(taken_over)
    failover.before_try("A", None, 1)
    assert api.clears == []  # one taker at a time: its clears must not be repeated
    failover.journal.update(
        lambda state: state.pending.update({TryKey("C", 1): state.pending[TryKey("C", 1)].abandon()})
    )  # gave up
    failover.before_try("A", None, 1)
    assert api.clears == [[("B", -1), ("D", -1)]] and failover.journal.load().pending == {}


def commit_b(store, tmp_path, try_number):
    source = tmp_path / f"b{try_number}"
    source.mkdir()
    (source / "part-0.parquet").write_bytes(b"rows of b")
    store.commit(RunRef("seed002", "r1").parse("b"), source, producer=Producer("B", -1, try_number))


def test_a_try_waits_while_a_restart_clears_its_producers_and_then_runs_after_them(seed002, tmp_path):
    description, store = seed002
    commit_b(store, tmp_path, 1)
    api = ScriptedApi(
        {"A": ("success", 1), "B": ("success", 1), "C": ("failed", 1), "D": ("running", 2)},
        cleared_tries={"B": 2, "D": 3},
    )
    clock = ManualClock(1000.0)
    failover = RunRecovery(description, "r1", store, api=api, clock=clock)

    def decided_not_cleared(state):  # C's handler decided to restart B (and D) and is still clearing
        state.pending[TryKey("C", 1)] = PendingRestart(("B", "D"), decided_at=1000.0)
        state.handled["C"] = 1
        state.superseded["D"] = 1  # D's try 1 ended on the same lost data; its try 2 starts at once

    failover.journal.update(decided_not_cleared)
    start = failover.before_try("D", None, 2)
    assert start.at == 1000.0 + PENDING_CLEARS_WAIT and "C#1" in start.reason  # it would read the old b
    assert api.clears == []
    # The handler is done: B restarts. b is still B's try 1 output, which that restart ended: D's try 2
    # lets itself go, and Airflow runs the next one after B.
    failover.journal.update(lambda state: (state.pending.pop(TryKey("C", 1)), state.superseded.update(B=1)))
    assert failover.before_try("D", None, 2) == Superseded("D restarts after B")
    assert api.clears == [[("D", -1)]]
    # Once B's try 2 has committed b, D's next try proceeds.
    commit_b(store, tmp_path, 2)
    failover.journal.update(lambda state: state.superseded.update(D=2))
    assert failover.before_try("D", None, 3) == Proceed()


def test_a_clear_refused_for_a_concurrent_change_is_sent_again(seed002, monkeypatch):
    # Airflow answers 409 when a clear meets a task ending at the same moment (two history rows for one
    # try); its transaction was rolled back. The handler reads the instances again and clears once more.
    import tenacity

    import airflow_ft_provider.recovery.clearing as clearing
    from airflow_ft_provider.hooks.airflow_api import AirflowApiError

    monkeypatch.setattr(clearing, "CLEAR_WAIT", tenacity.wait_none())
    description, store = seed002

    class ConflictOnce(ScriptedApi):
        def instances(self, dag_id, run_id):
            return [
                dataclasses.replace(ti, id=f"id-{ti.task_id}") for ti in super().instances(dag_id, run_id)
            ]

        def clear_instances(self, dag_id, run_id, keys):
            if not self.clears:
                self.clears.append("refused")
                raise AirflowApiError("POST", "/clearTaskInstances", 409, "Unique constraint violation")
            return super().clear_instances(dag_id, run_id, keys)

    api = ConflictOnce(
        {"A": ("success", 1), "B": ("success", 1), "C": ("failed", 1), "D": ("running", 1)},
        cleared_tries={"B": 2, "D": 2},
    )
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    decision = failover.handle_failure("C", None, 1, PartitionNotFound("b", Unavailable.MISSING_OBJECT))
    assert decision.restart and api.clears == ["refused", [("B", -1), ("D", -1)]]
    assert failover.journal.load().pending == {}


def test_a_handler_terminated_while_clearing_leaves_its_restart_to_the_next_try(seed002):
    # Airflow terminates a task whose heartbeats fail (SIGTERM: a BaseException in the task) while its
    # handler waits for the REST API: the restart must be marked given up, not held for the grace period.
    description, store = seed002

    class Terminated(BaseException):
        pass

    class TerminatedWhileClearing(ScriptedApi):
        def instances(self, dag_id, run_id):
            raise Terminated()

    api = TerminatedWhileClearing({}, cleared_tries={})
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    with pytest.raises(Terminated):
        failover.handle_failure("C", None, 1, PartitionNotFound("b", Unavailable.MISSING_OBJECT))
    assert failover.journal.load().pending[TryKey("C", 1)].abandoned is True


class MappedApi(ScriptedApi):
    def instances(self, dag_id, run_id):
        return [TaskInstanceRow(t, m, 1, "success") for t in ("read", "sink") for m in (0, 1)]

    def clear_instances(self, dag_id, run_id, keys):
        self.clears.append(sorted(keys))
        return [TaskInstanceRow(t, m, 1) for t, m in keys]


def test_a_mapped_stage_named_without_an_index_restarts_the_regions_of_all_its_indexes(s3_bucket):
    """read[0..1] --raw (pointwise, blocking)--> sink[0..1]: 'read' means read[0] and read[1]."""
    from airflow_ft_provider.failover.graph import DistributionPattern
    from airflow_ft_provider.model.description import PipelineWiringError

    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "mapped/")
    description = PipelineDescription(
        "mapped",
        [
            StageDeclaration("read", 2, (), (Output("raw"),), mapped=True),
            StageDeclaration("sink", 2, (Input("raw", DistributionPattern.POINTWISE),), (), mapped=True),
        ],
        restart_config=FIXED,
    )
    api = MappedApi({}, {})
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    assert failover.restart_regions("read[1]") == ["read[1]", "sink[1]"]
    assert failover.restart_regions("read") == ["read[0]", "read[1]", "sink[0]", "sink[1]"]
    assert api.clears[-1] == [("read", 0), ("read", 1), ("sink", 0), ("sink", 1)]
    # Both restarts are recorded at the same (manual) time: their order in the history is not defined.
    events = stored_events(failover.journal)
    assert sorted(e["task"] for e in events) == ["read", "read[1]"]
    event = next(e for e in events if e["task"] == "read")
    assert (event["task"], sorted(event["regions"])) == (
        "read",
        [["read[0]"], ["read[1]"], ["sink[0]"], ["sink[1]"]],
    )
    with pytest.raises(PipelineWiringError, match="'reed' is not a task of pipeline 'mapped'; tasks: read"):
        failover.restart_regions("reed")


class StoppingApi(ScriptedApi):
    """Also fails unfinished instances, as hooks/region_stop.py does through the REST API."""

    def __init__(self, states):
        super().__init__({}, {})
        self.states = states
        self.failed = []

    def instances(self, dag_id, run_id):
        return [TaskInstanceRow(t, m, 1, s) for (t, m), s in self.states.items()]

    def fail_unfinished(self, dag_id, run_id, keys, note):
        self.failed.append((sorted(keys), note))
        return sorted(k for k in keys if self.states[k] in (None, "running", "queued"))


def test_a_failure_a_restart_cannot_heal_stops_the_rest_of_its_region_at_once(s3_bucket):
    """shard[0..1] ~~parts (pipelined, all-to-all)~~> combine: one region. shard[0] has a code bug:
    shard[1] (still running) and combine (not started) are failed at once, nothing is restarted."""
    from airflow_ft_provider.failover.classification import FailureKind, FailureLabels
    from airflow_ft_provider.failover.graph import ResultPartitionType

    store = S3PartitionStore(s3_bucket.client(), s3_bucket.url + "stop/")
    description = PipelineDescription(
        "stop",
        [
            StageDeclaration("shard", 2, (), (Output("parts", ResultPartitionType.PIPELINED),), mapped=True),
            StageDeclaration("combine", 1, (Input("parts"),), (Output("total"),)),
            StageDeclaration("report", 1, (Input("total"),), ()),
        ],
        restart_config=FIXED,
    )
    api = StoppingApi(
        {("shard", 0): "running", ("shard", 1): "running", ("combine", -1): None, ("report", -1): None}
    )
    failover = RunRecovery(description, "r1", store, api=api, clock=ManualClock(1000.0))
    bug = FailureLabels(False, FailureKind.USER_CODE, "UNRESOLVED_COLUMN", "Spark analysis error")
    decision = failover.handle_failure("shard", 0, 1, "AnalysisException: amout", labels=bug)
    assert not decision.restart and api.clears == []
    # its region's other tasks, not the next region's (report: upstream_failed by Airflow)
    assert api.failed == [([("combine", -1), ("shard", 1)], api.failed[0][1])]
    assert "shard[0] failed and a restart cannot heal it" in api.failed[0][1]
    [event] = stored_events(failover.journal)
    assert event["stopped"] == ["combine", "shard[1]"]
    assert event["reason"].endswith("stopped the rest of its region: combine, shard[1]")
