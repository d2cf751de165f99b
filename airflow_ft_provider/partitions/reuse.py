"""Reusing a committed partition for a newer try of its producer: a manifest PUT, no data moved.

A try whose lineage (``provenance.py``) equals that of its own last committed output would compute the
same rows again; instead, the output is published anew for that try. The new manifest names the same
files (in the earlier attempt's directory, which the orphan cleanup then keeps), records the new try as
producer and is written by the same fenced PUT as any commit: it never replaces a newer try's manifest.
"""

from __future__ import annotations

import dataclasses
import logging

from .commit import PartitionCommits
from .errors import PartitionNotFound
from .fetch import PartitionReads
from .manifest import Manifest, Producer
from .naming import PartitionRef

log = logging.getLogger(__name__)


class PartitionReuse(PartitionCommits, PartitionReads):
    def reuse_output(self, ref: PartitionRef, producer: Producer, *, lineage: str) -> Manifest | None:
        """Publish blocking partition ``ref`` again for ``producer`` if it was computed with ``lineage``
        by the same task and every file is there unchanged (one GET, one LIST); None, writing nothing,
        otherwise. Raises StaleCommitError when a newer try committed it meanwhile."""
        try:
            current, _ = self.remote_files(ref)
        except PartitionNotFound as exc:
            log.info("not reusing %s: %s", ref, exc)
            return None
        made_by = (current.producer.task_id, current.producer.map_index)
        if current.provenance.lineage != lineage or made_by != (producer.task_id, producer.map_index):
            return None
        reused = dataclasses.replace(current, producer=producer, created_at=round(self._clock.now(), 3))
        self._publish(self._blocking(ref), reused)
        log.info(
            "reused partition %s (attempt %s of try %d) for try %d",
            ref,
            current.attempt_id,
            current.producer.try_number,
            producer.try_number,
        )
        return reused
