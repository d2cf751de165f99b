"""Fault injection acts only where ``[ft_provider] allow_fault_injection`` is on (default off)."""

from __future__ import annotations

import pytest

from airflow_ft_provider.faults import FaultInjector, InjectedFailure, NoFaults, injector_for

ALLOW = "AIRFLOW__FT_PROVIDER__ALLOW_FAULT_INJECTION"
FAULTS = [{"task": "score", "mode": "raise"}, {"task": "score", "delete": ["scored"]},
          {"task": "score", "mode": "kill"}, {"task": "report", "mode": "app"}]


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
    return injector_for(context(faults), task, store=StoreThatMustNotBeTouched(), run=None,
                        log=log or RecordingLog())


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


def test_on_a_malformed_request_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(ALLOW, "True")
    with pytest.raises(ValueError, match="ft_faults must be a list of objects"):
        injector("not a list")
    with pytest.raises(ValueError, match="mode must be one of"):
        injector([{"task": "score", "mode": "explode"}])
