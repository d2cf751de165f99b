"""The journal's stored state stays readable across releases (``recovery/journal_schema.py``).

``journal_v1/state.json`` was written by the release before typed recovery state (``FailoverState.to_json``
of that code, with two decisions, a per-region budget, superseded tries and two pending restarts).
"""

import json
from pathlib import Path

import pytest

from airflow_ft_provider.failover.decision import Outcome, TryKey
from airflow_ft_provider.recovery import journal_schema
from airflow_ft_provider.recovery.pending import PendingRestart

V1 = Path(__file__).with_name("journal_v1") / "state.json"


def test_a_state_written_by_the_previous_release_reads_into_typed_state():
    state = journal_schema.decode(V1.read_bytes())
    assert state.handled == {"C": 1, "D": 1} and state.superseded == {"B": 1, "D": 1}
    assert state.not_before == {"B": 1700000004.0, "C": 1700000004.0, "D": 1700000034.0}
    assert set(state.strategies) == {"run", "region:D"}
    c1 = state.decisions[TryKey("C", 1)]
    assert c1.outcome is Outcome.RESTART and c1.regions == (frozenset("C"), frozenset("B"), frozenset("D"))
    assert (c1.delay, c1.restart_at, c1.unavailable, c1.new_attempt) == (4.0, 1700000004.0, ("b",), True)
    assert c1.cause == "RuntimeError: boom" and c1.scope == "run"
    assert state.pending == {
        TryKey("C", 1): PendingRestart(
            ("B", "D"), 1700000000.0, {"B": 1}, abandoned=True, claimed_at=1700000020.5
        ),
        TryKey("D", 1): PendingRestart(("D",), 1700000030.0),
    }


def test_writing_it_back_keeps_every_field_the_previous_release_reads():
    old = json.loads(V1.read_bytes())
    new = json.loads(journal_schema.encode(journal_schema.decode(V1.read_bytes())))
    for decision in old["decisions"].values():
        del decision["reason"]  # words, rendered when shown (recovery/wording.py); no reader needs them
    for pending in old["unfinished"].values():
        pending.setdefault("ended", {})
        pending.setdefault("abandoned", False)
        pending.setdefault("claimed_at", None)
    assert new == old
    # And it reads back to the same typed state.
    assert journal_schema.decode(json.dumps(new).encode()) == journal_schema.decode(V1.read_bytes())


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(version=2), "unsupported recovery state version 2"),
        (lambda d: d.update(version=True), "unsupported recovery state version True"),
        (lambda d: d["decisions"].update({"C": {}}), r"decisions key not a task try key: 'C'"),
        (lambda d: d["decisions"]["C#1"].update(restart_at="soon"), r"decisions\['C#1'\]\['restart_at'\]"),
        (lambda d: d["decisions"]["C#1"].update(regions=[["C", 3]]), r"decisions\['C#1'\]\['regions'\]"),
        (lambda d: d["decisions"]["C#1"].update(try_number=-1), r"decisions\['C#1'\]\['try_number'\]"),
        (lambda d: d["strategies"].update(run=[1]), r"strategies\['run'\] must be an object"),
        (lambda d: d.update(handled=[]), "handled must be an object"),
    ],
)
def test_a_malformed_state_says_where(change, says):
    doc = json.loads(V1.read_bytes())
    change(doc)
    with pytest.raises(ValueError, match=says):
        journal_schema.decode(json.dumps(doc).encode())
