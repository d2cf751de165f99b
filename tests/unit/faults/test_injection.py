"""Fault injection acts only where ``[ft_provider] allow_fault_injection`` is on (default off), and
there a request that names no task or partition of the pipeline fails the try with the valid names.

    score --scored--> report        transform[0..1] (mapped, nothing exchanged)   other
"""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_ft_provider.faults import NoFaults
from airflow_ft_provider.faults.injection import FaultInjector, InjectedFailure, injector_for
from airflow_ft_provider.model.description import PipelineDescription, StageDeclaration
from airflow_ft_provider.model.exchanges import Input, Output

GRAPH = PipelineDescription(
    "ft_faults_gate",
    [
        StageDeclaration("score", 1, (), (Output("scored"),)),
        StageDeclaration("report", 1, (Input("scored"),), ()),
        StageDeclaration("transform", 2, (), (Output("transformed"),), mapped=True),
        StageDeclaration("other", 1, (), ()),
    ],
).graph

ALLOW = "AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION"
FAULTS = [
    {"task": "score", "mode": "raise"},
    {"task": "score", "delete": ["scored"]},
    {"task": "score", "mode": "kill"},
    {"task": "report", "mode": "app"},
]


class TryStub:
    try_number = 1


class StoreThatMustNotBeTouched:
    """Any attribute access means the injector reached for the store: the gate leaked."""

    def __getattr__(self, name):
        raise AssertionError(f"the store was used ({name}) although fault injection is off")


def context(faults):
    return {"dag_run": type("DagRun", (), {"conf": {"ft_faults": faults}})(), "params": {}, "ti": TryStub()}


class RecordingLog:
    def __init__(self):
        self.lines = []

    def warning(self, message, *args):
        self.lines.append(message % args)

    info = warning


def injector(faults, task="score", log=None):
    return injector_for(
        context(faults),
        task,
        graph=GRAPH,
        store=StoreThatMustNotBeTouched(),
        run=None,
        log=log or RecordingLog(),
    )


def test_faults_requested_while_off_are_a_logged_no_op(monkeypatch):
    monkeypatch.delenv(ALLOW, raising=False)  # the default
    log = RecordingLog()
    chosen = injector(FAULTS, log=log)
    assert isinstance(chosen, NoFaults) and not chosen.fails_in_app
    chosen.before_work()  # would raise InjectedFailure, delete a partition ...
    chosen.after_work()  # ... or SIGKILL this process if the gate leaked
    (warning,) = log.lines
    assert "ignoring ft_faults in the run's conf: fault injection is off" in warning
    assert "AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION=True" in warning


def test_off_also_ignores_a_malformed_request(monkeypatch):
    monkeypatch.setenv(ALLOW, "False")
    assert isinstance(injector("not a list"), NoFaults)


def test_a_run_without_faults_never_reads_the_setting_or_warns(monkeypatch):
    monkeypatch.setenv(ALLOW, "not a boolean")  # reading it would raise
    log = RecordingLog()
    assert isinstance(injector([], log=log), NoFaults)
    assert log.lines == []


def test_on_the_faults_of_the_task_are_injected(monkeypatch):
    monkeypatch.setenv(ALLOW, "True")
    chosen = injector(FAULTS)
    assert isinstance(chosen, FaultInjector)
    assert [f.mode for f in chosen.faults] == ["raise", "none", "kill"]
    assert not chosen.fails_in_app
    assert injector(FAULTS, task="report").fails_in_app
    assert isinstance(injector(FAULTS, task="other"), NoFaults)
    raising = injector([{"task": "score"}])
    with pytest.raises(InjectedFailure, match="injected failure of score on try 1"):
        raising.before_work()


def test_on_a_malformed_request_fails_the_try_without_a_retry(monkeypatch):
    monkeypatch.setenv(ALLOW, "True")
    with pytest.raises(AirflowFailException, match="ft_faults must be a list of objects"):
        injector("not a list")
    with pytest.raises(AirflowFailException, match="mode must be one of"):
        injector([{"task": "score", "mode": "explode"}])
    with pytest.raises(AirflowFailException, match="times must be an integer ≥ 1, got '2'"):
        injector([{"task": "score", "times": "2"}])


@pytest.mark.parametrize(
    ("faults", "says"),
    [
        (
            [{"task": "transfrom[1]"}],
            "the pipeline has no task 'transfrom[1]'; tasks: other, report, score, "
            "transform[0], transform[1]",
        ),
        ([{"task": "transform"}], "the pipeline has no task 'transform'"),  # a mapped stage: name an index
        (
            [{"task": "report", "delete": ["socred"]}],
            "the pipeline has no partition 'socred'; partitions: scored, transformed[0], transformed[1]",
        ),
        ([{"task": "report", "truncate": "scored"}], "truncate must be a list of partition ids"),
    ],
    ids=["misspelt-task", "mapped-stage-without-index", "misspelt-partition", "partitions-not-a-list"],
)
def test_a_request_naming_what_the_pipeline_lacks_fails_every_task_with_the_valid_names(
    monkeypatch, faults, says
):
    """Every task of the run checks the whole list, not only the entries naming it: a typo fails the
    run at its first try instead of letting it succeed without the fault (and look recovered)."""
    monkeypatch.setenv(ALLOW, "True")
    for task in ("score", "other"):
        with pytest.raises(AirflowFailException, match="invalid ft_faults in the run's conf") as failed:
            injector(faults, task=task)
        assert says in str(failed.value)


def test_a_try_whose_run_asks_for_no_faults_never_loads_the_injection_code():
    import subprocess
    import sys

    probe = (
        "import sys, logging\n"
        "from airflow_ft_provider.faults import NO_FAULTS, faults_for\n"
        "chosen = faults_for({'dag_run': None, 'params': {}}, 'score', graph=None, store=None, run=None,"
        " log=logging.getLogger())\n"
        "print(chosen is NO_FAULTS, 'airflow_ft_provider.faults.injection' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-2:] == ["True", "False"]


def test_a_stage_not_expanded_yet_may_be_named_and_a_typo_still_fails():
    from airflow_ft_provider.faults.injection import parse_faults

    ahead = [{"task": "score_file[23]", "times": 1}, {"task": "report", "delete": ["scores[5]"]}]
    tasks, partitions = ["parse_file[0]", "report"], ["parsed[0]"]
    later = {"score_file", "scores"}  # pending: counted when score_file's first try starts
    assert [
        f.task for f in parse_faults(ahead, "report", tasks=tasks, partitions=partitions, later=later)
    ] == ["report"]
    with pytest.raises(ValueError, match="no task 'scor_file\\[23\\]'"):
        parse_faults([{"task": "scor_file[23]"}], "report", tasks=tasks, partitions=partitions, later=later)
    with pytest.raises(ValueError, match="no partition 'score\\[5\\]'"):
        parse_faults(
            [{"task": "report", "delete": ["score[5]"]}],
            "report",
            tasks=tasks,
            partitions=partitions,
            later=later,
        )
