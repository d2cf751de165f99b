"""Reusing committed partitions instead of computing them again: within a run, a manifest PUT; across
runs, copies inside S3.

A try whose lineage (``provenance.py``) equals that of an output its task committed would compute the
same rows again. Within a run (its own last committed output), the output is published anew for the
new try: the new manifest names the same files (in the earlier attempt's directory, which the orphan
cleanup then keeps). Across runs (``reuse="across-runs"``), an earlier run of the pipeline that the store
still keeps is looked up by the same lineage and its files are copied into this run, so that its
release does not take this run's data with it. Either way the manifest is written by the same fenced
PUT as any commit: it never replaces a newer try's manifest.
"""

from __future__ import annotations

import dataclasses
import logging
from concurrent.futures import ThreadPoolExecutor

from botocore.exceptions import ClientError

from .commit import PartitionCommits, new_attempt_id
from .errors import MISSING_CODES, PartitionNotFound, error_code
from .fetch import PartitionReads
from .manifest import FileEntry, Manifest, Producer
from .naming import PartitionRef, RunRef, attempt_dir
from .s3_objects import StoreObjects

log = logging.getLogger(__name__)

# Earlier runs looked at for an output with the same lineage, newest run ids first (Airflow's run ids
# carry their logical date): one manifest GET each.
MAX_EARLIER_RUNS = 20


class _SourceGone(Exception):
    """An object of the earlier run's partition vanished while being copied (that run was released)."""


class PartitionReuse:
    """Reuse protocol: an earlier try's or run's committed output published again, unchanged."""

    def __init__(self, objects: StoreObjects, commits: PartitionCommits, reads: PartitionReads) -> None:
        self.objects = objects
        self.commits = commits
        self.reads = reads

    def reuse_output(self, ref: PartitionRef, producer: Producer, *, lineage: str) -> Manifest | None:
        """Publish blocking partition ``ref`` again for ``producer`` if it was computed with ``lineage``
        by the same task and every file is there unchanged (one GET, one LIST); None, writing nothing,
        otherwise. Raises StaleCommitError when a newer try committed it meanwhile."""
        try:
            current, _ = self.reads.remote_files(ref)
        except PartitionNotFound as exc:
            log.info("not reusing %s: %s", ref, exc)
            return None
        made_by = (current.producer.task_id, current.producer.map_index)
        if current.provenance.lineage != lineage or made_by != (producer.task_id, producer.map_index):
            return None
        reused = dataclasses.replace(
            current, producer=producer, created_at=round(self.objects.clock.now(), 3)
        )
        self.commits._publish(self.objects.blocking(ref), reused)
        log.info(
            "reused partition %s (attempt %s of try %d) for try %d",
            ref,
            current.attempt_id,
            current.producer.try_number,
            producer.try_number,
        )
        return reused

    def earlier_run_outputs(
        self, refs: list[PartitionRef], producer: Producer, *, lineage: str
    ) -> dict[str, Manifest] | None:
        """For each of ``refs`` (partition id -> manifest), the same partition in the newest earlier run
        the store keeps whose copy was computed with ``lineage`` by the same task (one LIST, then a
        manifest GET per run and partition, at most ``MAX_EARLIER_RUNS`` runs); None when one has none."""
        if not refs:
            return {}
        current = refs[0].run
        candidates = sorted(
            (r for r in self.objects.runs(current.pipeline) if r != current), key=lambda r: r.run_id
        )
        found: dict[str, Manifest] = {}
        for ref in refs:
            for run in reversed(candidates[-MAX_EARLIER_RUNS:]):
                try:
                    manifest = self.objects.manifest(run.partition(ref.result, ref.map_index))
                except PartitionNotFound:
                    continue
                made_by = (manifest.producer.task_id, manifest.producer.map_index)
                if manifest.provenance.lineage == lineage and made_by == (
                    producer.task_id,
                    producer.map_index,
                ):
                    found[ref.partition_id] = manifest
                    break
            else:
                return None
        return found

    def copy_output(self, ref: PartitionRef, source: Manifest, producer: Producer) -> Manifest | None:
        """Commit blocking partition ``ref`` for ``producer`` with the files of ``source`` (an earlier
        run's manifest of the same partition), copied inside S3 into a new attempt, and its row count and
        provenance; None, with nothing published, when one of its files is gone. Raises
        StaleCommitError when a newer try committed ``ref`` meanwhile."""
        source_prefix = self.objects.layout.partition_prefix(
            RunRef(source.pipeline, source.run_id).partition(source.result, source.map_index)
        )
        loc = self.objects.blocking(ref)
        attempt_id = new_attempt_id(producer.try_number)

        def copy(entry: FileEntry) -> FileEntry:
            key = attempt_dir(attempt_id) + entry.name
            with self.objects.s3_errors("CopyObject", loc.prefix + key):
                try:
                    self.objects.client.copy(
                        {"Bucket": self.objects.bucket, "Key": source_prefix + entry.key},
                        self.objects.bucket,
                        loc.prefix + key,
                        Config=self.objects.transfer_config,
                    )
                except ClientError as exc:
                    if error_code(exc) in MISSING_CODES:
                        raise _SourceGone(entry.key) from exc
                    raise
            return FileEntry(key, entry.size, entry.checksum)

        def copy_all() -> list[FileEntry]:
            with ThreadPoolExecutor(max_workers=8, thread_name_prefix="ft-copy") as pool:
                return list(pool.map(copy, source.files))

        try:
            manifest = self.commits._publish_attempt(
                loc,
                attempt_id,
                copy_all,
                producer,
                source.format,
                source.compression,
                source.row_count,
                source.provenance,
            )
        except _SourceGone as gone:
            log.info("not reusing %s of run %s: its file %s is gone", ref, source.run_id, gone)
            return None
        log.info(
            "copied partition %s of run %s (attempt %s) for try %d",
            ref,
            source.run_id,
            source.attempt_id,
            producer.try_number,
        )
        return manifest
