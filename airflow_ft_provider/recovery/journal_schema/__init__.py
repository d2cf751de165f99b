"""The run's recovery journal as stored JSON, validated on read: the one encoder and decoder of its
state (``state.py``: ``_failover/state.json``, versioned) and of its events (``events.py``:
``_failover/events/*.json``, the typed events of ``journal_events.py``)."""

from airflow_ft_provider.recovery.journal_schema.events import (
    MAX_EVENT_BYTES,
    decode_event,
    encode_event,
    event_from_json,
    failover_event,
)
from airflow_ft_provider.recovery.journal_schema.state import (
    MAX_STATE_BYTES,
    READERS,
    SCHEMA_VERSION,
    decision_fields,
    decode,
    encode,
)

__all__ = [
    "MAX_EVENT_BYTES",
    "MAX_STATE_BYTES",
    "READERS",
    "SCHEMA_VERSION",
    "decision_fields",
    "decode",
    "decode_event",
    "encode",
    "encode_event",
    "event_from_json",
    "failover_event",
]
