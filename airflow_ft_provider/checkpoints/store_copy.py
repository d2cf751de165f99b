"""The primary copy of a checkpointed task's checkpoints, in the partition store under the run's prefix
(seed 003: the task-local directory is the secondary copy).

    <run>/checkpoints/<task>/objects/<sha256>[.gz]     a file of one or more checkpoints, uploaded once
    <run>/checkpoints/<task>/chk-<id:010d>/_metadata   the checkpoint: its fence and its files, written last

A checkpoint is visible only once its ``_metadata`` is (Flink writes ``_metadata`` last too): a worker
killed during an upload leaves objects nobody lists, removed by the next ``retain`` or by the run's
release (``release_run`` deletes everything under the run's prefix). Every file restored is checked
against the SHA-256 the ``_metadata`` names.

A restore fetches Spark's files only. The output of the covered micro-batches (most of a checkpoint,
late in a stage) stays in the store, noted in its batch directories (``spark/carried.py``): the retry's
checkpoints list it, and the commit copies it inside S3, as it does the output on the disk.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from airflow_ft_provider.checkpoints.file_facts import (
    FileFacts,
    FileHashes,
    carried_files,
    may_stay,
    noted_in,
    object_name,
    output_data,
    sha256_of,
)
from airflow_ft_provider.checkpoints.snapshot import (
    CheckpointFile,
    CheckpointMetadata,
    InvalidCheckpoint,
    files_of_checkpoint,
)
from airflow_ft_provider.partitions import RunRef, S3PartitionStore, StoredCopy
from airflow_ft_provider.spark.carried import CarriedFile, InvalidNote, write_note

log = logging.getLogger(__name__)

METADATA = "_metadata"
_CHUNK = 1 << 20


class CheckpointTimeout(RuntimeError):
    """A checkpoint's upload took longer than ``execution.checkpointing.timeout``."""


@dataclass(frozen=True)
class Fence:
    """What the checkpoints of a try are taken against (see ``fencing``), and by which try."""

    inputs: dict[str, str]
    total_bytes: int
    try_number: int


class StoreCheckpoints:
    def __init__(
        self,
        store: S3PartitionStore,
        run: RunRef,
        task: str,
        *,
        on_step: Callable[[str, int], None] | None = None,
    ) -> None:
        self.store = store
        self.prefix = store.layout.checkpoints_prefix(run, task)
        self.task = task
        self._on_step = on_step  # tests: crash at a step ("objects_uploaded", checkpoint id)
        self._hashes = FileHashes()
        self._in_store: set[str] = set()  # object names known to be uploaded

    # -- reading --------------------------------------------------------------------------------
    def completed_ids(self) -> list[int]:
        """The ids of the completed checkpoints in the store, newest first."""
        ids = []
        for key in self.store.list_objects(self.prefix + "chk-"):
            name, _, rest = key[len(self.prefix) :].partition("/")
            if rest == METADATA and name[4:].isdigit():
                ids.append(int(name[4:]))
        return sorted(ids, reverse=True)

    def metadata(self, checkpoint_id: int) -> CheckpointMetadata | None:
        data = self.store.read_object(self._metadata_key(checkpoint_id))
        return None if data is None else CheckpointMetadata.from_json(data, expected_id=checkpoint_id)

    def candidates(self) -> Iterable[CheckpointMetadata]:
        """The completed checkpoints, newest first; an invalid ``_metadata`` is logged and passed over."""
        for checkpoint_id in self.completed_ids():
            try:
                found = self.metadata(checkpoint_id)
            except InvalidCheckpoint as err:
                log.warning("%s: passing over checkpoint %d: %s", self.task, checkpoint_id, err)
                continue
            if found is not None:
                yield found

    # -- writing --------------------------------------------------------------------------------
    def take(
        self,
        task_dir: Path,
        checkpoint_id: int,
        fence: Fence,
        *,
        processed_bytes: int,
        compress: bool,
        deadline: float | None = None,
    ) -> CheckpointMetadata:
        """Upload checkpoint ``checkpoint_id`` of ``task_dir``: the files the store lacks, then ``_metadata``.
        ``deadline`` (``time.monotonic()``): :class:`CheckpointTimeout` past it, ``_metadata`` unwritten."""
        started = time.time()
        files: list[CheckpointFile] = []
        for path in files_of_checkpoint(task_dir, checkpoint_id):
            relative = path.relative_to(task_dir).as_posix()
            output = output_data(relative)
            try:
                facts = self._hashes.of(path, output=output)
            except FileNotFoundError:
                continue  # removed by Spark meanwhile (old logs and state versions): not needed
            files.append(
                CheckpointFile(relative, facts.size, facts.sha256, compress and not output, facts.rows)
            )
        missing = {object_name(f): f for f in files if object_name(f) not in self._in_store}
        with ThreadPoolExecutor(self.store.max_workers, thread_name_prefix="ft-checkpoint") as pool:
            uploads = {
                name: pool.submit(self._upload, task_dir / f.path, name, f.compressed, deadline)
                for name, f in missing.items()
            }
            vanished = {name for name, upload in uploads.items() if not upload.result()}
        files = [f for f in files if object_name(f) not in vanished]
        missing = {name: f for name, f in missing.items() if name not in vanished}
        self._in_store.update(missing)
        files.extend(carried_files(task_dir, checkpoint_id))  # in the store already, by a restore
        self._step("objects_uploaded", checkpoint_id)
        if deadline is not None and time.monotonic() > deadline:
            raise CheckpointTimeout(f"checkpoint {checkpoint_id}: its upload outlasted the timeout")
        metadata = CheckpointMetadata(
            checkpoint_id=checkpoint_id,
            taken_by_try=fence.try_number,
            inputs=fence.inputs,
            total_bytes=fence.total_bytes,
            processed_bytes=processed_bytes,
            local_path=task_dir.as_uri(),
            files=tuple(files),
            started=started,
            completed=time.time(),
            uploaded_bytes=sum(f.size for f in missing.values()),
        )
        self.store.write_object(self._metadata_key(checkpoint_id), metadata.to_json())
        return metadata

    def _upload(self, path: Path, name: str, compressed: bool, deadline: float | None) -> bool:
        """Upload one file as object ``name``; False when Spark removed it meanwhile."""
        if deadline is not None and time.monotonic() > deadline:
            raise CheckpointTimeout(f"checkpoint upload outlasted the timeout before {path.name}")
        key = self.prefix + "objects/" + name
        try:
            if not compressed:
                self.store.upload_file(key, path)
                return True
            with tempfile.NamedTemporaryFile(suffix=".gz") as packed:
                with open(path, "rb") as source, gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as sink:
                    shutil.copyfileobj(source, sink, _CHUNK)
                packed.flush()
                self.store.upload_file(key, packed.name)
        except FileNotFoundError:
            if path.exists():
                raise
            return False
        return True

    def retain(self, keep: int) -> int:
        """Keep the newest ``keep`` completed checkpoints (``state.checkpoints.num-retained``): delete the
        others' ``_metadata``, then every object no kept checkpoint lists. Returns the objects deleted."""
        ids = self.completed_ids()
        doomed = [self._metadata_key(i) for i in ids[keep:]]
        self.store.delete_keys(doomed)
        kept: set[str] = set()
        for checkpoint_id in ids[:keep]:
            try:
                found = self.metadata(checkpoint_id)
            except InvalidCheckpoint:
                continue
            if found is not None:
                kept.update(object_name(f) for f in found.files)
        objects = [
            k for k in self.store.list_objects(self.prefix + "objects/") if k.rsplit("/", 1)[1] not in kept
        ]
        self.store.delete_keys(objects)
        self._in_store &= kept
        return len(objects)

    def release(self) -> int:
        """Delete every checkpoint of the task (its output is committed, or it starts afresh)."""
        keys = list(self.store.list_objects(self.prefix))
        self.store.delete_keys(keys)
        self._in_store.clear()
        return len(keys)

    def stored_outputs(self, metadata: CheckpointMetadata, task_dir: Path) -> dict[Path, StoredCopy]:
        """The output files under ``task_dir`` whose bytes the store has: those of ``metadata`` on this
        disk, and those a restore left in the store (noted; they are nowhere else)."""
        found = {
            task_dir / f.path: StoredCopy(self._object_key(f), f.size, f"sha256:{f.sha256}")
            for f in metadata.files
            if f.path.startswith("out/") and not f.compressed and (task_dir / f.path).is_file()
        }
        for f in carried_files(task_dir, metadata.checkpoint_id):
            found[task_dir / f.path] = StoredCopy(self._object_key(f), f.size, f"sha256:{f.sha256}")
        return found

    # -- restoring ------------------------------------------------------------------------------
    def restore(self, metadata: CheckpointMetadata, task_dir: Path) -> int:
        """Make ``task_dir`` (which holds none of the checkpoint's files yet) the checkpoint: Spark's files
        are downloaded, each checked against its SHA-256 (:class:`InvalidCheckpoint` names a missing or
        damaged one); the output files whose rows are known stay in the store, noted in their batch
        directories (``spark/carried.py``), for the commit to copy inside S3. Returns bytes downloaded."""
        fetched = [f for f in metadata.files if not may_stay(f)]
        with ThreadPoolExecutor(self.store.max_workers, thread_name_prefix="ft-restore") as pool:
            for done in [pool.submit(self._download, f, task_dir) for f in fetched]:
                done.result()
        staying: dict[Path, list[CarriedFile]] = {}
        for f in metadata.files:
            if may_stay(f) and f.rows is not None:
                folder, name = noted_in(f.path)
                staying.setdefault(task_dir / folder, []).append(CarriedFile(name, f.size, f.sha256, f.rows))
        for batch_dir, kept in staying.items():
            write_note(batch_dir, kept)
        self._remember(metadata, task_dir)
        return sum(f.size for f in fetched)

    def _download(self, file: CheckpointFile, task_dir: Path) -> None:
        target = task_dir / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.download")
        if not self.store.download_file(self._object_key(file), temp):
            raise InvalidCheckpoint(f"{file.path}: its object is missing from the store")
        if file.compressed:
            unpacked = target.with_name(f".{target.name}.unpacked")
            with gzip.open(temp, "rb") as source, open(unpacked, "wb") as sink:
                shutil.copyfileobj(source, sink, _CHUNK)
            os.replace(unpacked, temp)
        if sha256_of(temp) != file.sha256 or temp.stat().st_size != file.size:
            temp.unlink()
            raise InvalidCheckpoint(f"{file.path}: the store's object does not match its SHA-256")
        os.replace(temp, target)

    def verify_local(self, metadata: CheckpointMetadata, task_dir: Path) -> str | None:
        """None when ``task_dir`` holds every file of the checkpoint intact, or notes it as left in the
        store (local recovery may use it), else what is wrong. Files of later batches are removed: Spark
        resumes after the checkpoint."""
        try:
            noted = {f.path: f.sha256 for f in carried_files(task_dir, None)}
        except InvalidNote as err:
            return f"a note of output left in the store is damaged ({err})"
        listed = {f.path: f.sha256 for f in metadata.files}
        for relative, sha256 in noted.items():
            if listed.get(relative) != sha256:
                return (
                    f"{relative} is noted as in the store, but checkpoint {metadata.checkpoint_id} lacks it"
                )
        for file in metadata.files:
            path = task_dir / file.path
            if noted.get(file.path) == file.sha256:
                continue
            if not path.is_file():
                return f"{file.path} is missing"
            facts = self._hashes.of(path, output=output_data(file.path))
            if (facts.size, facts.sha256) != (file.size, file.sha256):
                return f"{file.path} differs from the checkpoint's"
        for root in (task_dir / "spark", task_dir / "out"):
            for path in sorted(root.rglob("*")) if root.is_dir() else ():
                if (
                    path.is_file()
                    and path.relative_to(task_dir).as_posix() not in listed
                    and not path.name.startswith(".")
                ):
                    path.unlink()
                    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
        self._remember(metadata, task_dir)
        return None

    def _remember(self, metadata: CheckpointMetadata, task_dir: Path) -> None:
        """The checkpoint's objects are in the store, and its files here have these hashes."""
        self._in_store.update(object_name(f) for f in metadata.files)
        for file in metadata.files:
            path = task_dir / file.path
            if not path.is_file():
                continue  # left in the store (noted)
            stat = path.stat()
            self._hashes.known[(str(path), stat.st_size, stat.st_mtime_ns)] = FileFacts(
                file.size, file.sha256, file.rows
            )

    def _object_key(self, file: CheckpointFile) -> str:
        return self.prefix + "objects/" + object_name(file)

    def _metadata_key(self, checkpoint_id: int) -> str:
        return f"{self.prefix}chk-{checkpoint_id:010d}/{METADATA}"

    def _step(self, step: str, checkpoint_id: int) -> None:
        if self._on_step is not None:
            self._on_step(step, checkpoint_id)
