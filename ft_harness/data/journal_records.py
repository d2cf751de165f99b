"""A run's recovery journal as tests read it: every event in its stored JSON form."""

from __future__ import annotations

from airflow_ft_provider.recovery.journal import RecoveryJournal


def stored_events(journal: RecoveryJournal) -> list[dict[str, object]]:
    """The run's history events, oldest first, as stored (what ``airflow-ft history`` prints)."""
    return [event.to_json() for event in journal.events()]
