"""Whether this process has the Spark Connect client loaded (``execution/preload.py`` loads it early)."""

from __future__ import annotations

import sys

CLIENT_MODULE = "pyspark.sql.connect.session"


def preloaded() -> bool:
    """Whether this process already has the client (inherited from the worker or imported earlier)."""
    return CLIENT_MODULE in sys.modules
