"""Starting a streaming query whose ``foreachBatch`` function runs in a Python process of the Spark
server, again when that process was too slow to start.

On Spark Connect, ``start()`` of a ``foreachBatch`` query launches a Python process in the server that
imports the Connect client and must connect back within Spark's fixed 10 s (``PythonWorkerFactory``,
not configurable). A server busy with other stages' work misses it now and then, and ``start()`` fails
with "Python worker failed to connect back". Nothing ran: no micro-batch, no checkpoint. Failing the
try would spend a restart of the run's budget on a healthy stage (two loaded runs used 6 of 8), so the
start is tried again here, a bounded number of times with growing pauses; any other failure, or the
last attempt's, is the stage's as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from .stage_errors import StageIOError

log = logging.getLogger(__name__)

CONNECT_BACK_FAILURE = "Python worker failed to connect back"
START_ATTEMPTS = 4  # about 10 s each, with pauses of 5, 10 and 15 s: a load peak of over a minute fails
PAUSE_SECONDS = 5.0

Query = TypeVar("Query")


def start_query(start: Callable[[], Query], *, sleep: Callable[[float], None] = time.sleep) -> Query:
    """``start()``, tried up to ``START_ATTEMPTS`` times while it fails only because the server's
    Python process did not connect back in time."""
    for attempt in range(1, START_ATTEMPTS):
        try:
            return start()
        except Exception as err:
            if CONNECT_BACK_FAILURE not in str(err):
                raise
            pause = PAUSE_SECONDS * attempt
            log.warning(
                "the streaming query's foreachBatch Python process did not connect back to the Spark "
                "server in time (a busy server; attempt %d of %d): nothing ran, starting it again in %.0f s",
                attempt,
                START_ATTEMPTS,
                pause,
            )
            sleep(pause)
    return start()  # the last attempt: its failure is the stage's


def start_stream(start: Callable[[], Query], *, stage: str, output: str, mode: str) -> Query:
    """``start_query``, with Spark's refusal of the output mode said in the stage's terms."""
    try:
        return start_query(start)
    except Exception as err:
        if "output mode" not in str(err).lower():
            raise
        raise StageIOError(
            f"stage {stage!r} cannot write {output!r} in output mode {mode!r} ({err}); an aggregation "
            "needs write_stream(..., output_mode='complete'); operations Spark cannot run incrementally "
            "(sorting before an aggregation, limit) need an ordinary stage (read/write, checkpointing=False)"
        ) from err
