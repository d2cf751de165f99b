"""The S3 result-partition store: commit, read, availability, consumers, release and clean-up.

Commit protocol: data files go to ``…/attempts/<attempt>/`` first; the partition becomes visible only
when its manifest is written, in one conditional PUT. Readers resolve a partition only through the
manifest, so a crash at any point leaves the old state or the new one, never a partial partition.
The producer's try number fences zombies: a commit never replaces a manifest of a newer try.
"""

from __future__ import annotations

import logging
import os
import queue
import reprlib
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..failover.clock import Clock, SystemClock
from ..safe_json import is_finite_number, load_json
from .cache import LocalPartitionCache
from .conditional import ConditionalJsonStore, Versioned, require_conditional_writes
from .errors import (
    DEFAULT_CREDENTIALS,
    MISSING_CODES,
    ConsumerRegistrationRefused,
    PartitionNotFound,
    PartitionStoreError,
    ReleaseRefused,
    StaleCommitError,
    Unavailable,
    error_code,
    s3_errors,
)
from .manifest import (
    DEFAULT_CHECKSUM,
    MAX_MANIFEST_BYTES,
    FileEntry,
    InvalidManifest,
    Manifest,
    Producer,
    check_algorithm,
    check_codec,
    file_checksum,
    new_hasher,
)
from .naming import (
    ATTEMPTS_DIR,
    MANIFEST_NAME,
    PartitionRef,
    RunRef,
    StoreLayout,
    attempt_dir,
    check_encoded_name,
    check_name,
    check_relative_path,
    decode_segment,
)

if TYPE_CHECKING:
    from boto3.s3.transfer import TransferConfig

    from ..failover.graph import StageGraph

log = logging.getLogger(__name__)

MiB = 1 << 20
DEFAULT_RETENTION = 7 * 24 * 3600.0
DEFAULT_ORPHAN_GRACE = 3600.0
# Reasons of release_expired_runs for runs it does not consider (not what a sweep reports as kept).
NOT_SUCCEEDED = "run has not succeeded (or was not marked)"
ALREADY_RELEASED = "already released"
MAX_MARKER_BYTES = 64 * 1024  # leases and run markers are a few hundred bytes
StepHook = Callable[[str, Mapping[str, Any]], None]


def new_attempt_id(try_number: int) -> str:
    """A unique attempt id that also says which try of the producer wrote it."""
    return f"t{try_number}-{uuid.uuid4().hex[:16]}"


def default_transfer_config() -> TransferConfig:
    """Multipart above 64 MiB in 32 MiB parts, 8 parallel requests (boto3's transfer manager).

    Spark's part files are mostly tens of MB and a partition's files go up in parallel anyway; below
    64 MiB a multipart upload only adds two requests and a server-side assembly per file (4 x 40 MB
    committed to moto: 1.33 s with a 32 MiB threshold, 0.91 s with 64 MiB)."""
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(multipart_threshold=64 * MiB, multipart_chunksize=32 * MiB, max_concurrency=8)


@dataclass(frozen=True)
class _Location:
    """Where one partition's manifest and attempts live (blocking, or scratch of one execution)."""

    ref: PartitionRef
    kind: str
    prefix: str

    @property
    def manifest_key(self) -> str:
        return self.prefix + MANIFEST_NAME


@dataclass(frozen=True)
class FetchedPartition:
    """A partition's files on local disk, in manifest order, verified against the manifest."""

    manifest: Manifest
    paths: tuple[Path, ...]
    cache_hits: int = 0
    downloaded: int = 0


@dataclass(frozen=True)
class UnavailablePartition:
    partition_id: str
    reason: Unavailable
    detail: str = ""

    def error(self, run: RunRef | None = None) -> PartitionNotFound:
        return PartitionNotFound(self.partition_id, self.reason, self.detail, run=str(run or ""))


@dataclass(frozen=True)
class AvailabilityReport:
    """Which partitions can be consumed again; ``unavailable_ids`` feeds the failover strategy."""

    run: RunRef
    available: frozenset[str]
    unavailable: Mapping[str, UnavailablePartition]
    manifests: Mapping[str, Manifest] = field(default_factory=dict)  # every manifest that was read

    @property
    def unavailable_ids(self) -> set[str]:
        return set(self.unavailable)


@dataclass(frozen=True)
class Lease:
    """A registered consumer; while it is active, release of the partitions it names is refused."""

    consumer: str
    partitions: tuple[str, ...] | None  # None: every partition of the run
    registered_at: float
    expires_at: float | None = None

    def active(self, now: float) -> bool:
        return self.expires_at is None or now < self.expires_at

    def covers(self, partitions: Iterable[str] | None) -> bool:
        if partitions is None or self.partitions is None:
            return True
        return not set(self.partitions).isdisjoint(partitions)


@dataclass(frozen=True)
class ReleaseReport:
    run: RunRef
    partitions: tuple[str, ...] | None
    deleted_objects: int
    reason: str


@dataclass(frozen=True)
class RetentionOutcome:
    run: RunRef
    released: bool
    reason: str


@dataclass(frozen=True)
class OrphanReport:
    run: RunRef
    deleted_keys: tuple[str, ...] = ()
    aborted_uploads: tuple[str, ...] = ()
    kept_in_flight: tuple[str, ...] = ()  # attempt prefixes younger than the grace period


@dataclass(frozen=True)
class _ObjectInfo:
    size: int
    last_modified: float


@dataclass
class _Transfers:
    """Runs boto3 transfers in parallel and hands each finished one back to the calling thread."""

    manager: Any
    done: queue.Queue[Any] = field(default_factory=queue.Queue)

    def subscriber(self, tag: Any, size: int | None = None) -> Any:
        from s3transfer.subscribers import BaseSubscriber

        outer = self

        class _Subscriber(BaseSubscriber):  # type: ignore[misc]
            def on_queued(self, future: Any, **kwargs: Any) -> None:
                if size is not None:
                    future.meta.provide_transfer_size(size)  # known from the manifest: skip a HEAD

            def on_done(self, future: Any, **kwargs: Any) -> None:
                outer.done.put((tag, future))

        return _Subscriber()


class _HashingWriter:
    """A write-only file target that counts and checksums bytes on their way to disk.

    The file is opened on the first write, so a partition of thousands of files does not hold
    thousands of descriptors while its downloads wait in the queue.
    """

    def __init__(self, path: Path, checksum: str | None) -> None:
        self._path = path
        self._file: Any = None
        self._closed = False
        self._hasher = new_hasher(checksum) if checksum else None
        self._algorithm = checksum.partition(":")[0] if checksum else ""
        self.size = 0

    def write(self, data: bytes) -> int:
        if self._file is None:
            self._file = open(self._path, "wb")  # noqa: SIM115 - closed by close()
        if self._hasher is not None:
            self._hasher.update(data)
        self.size += len(data)
        return self._file.write(data)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._file is None:
            self._path.touch()  # an empty object: no write ever came
        else:
            self._file.close()

    def problem(self, entry: FileEntry) -> tuple[Unavailable, str] | None:
        if self.size != entry.size:
            return Unavailable.SIZE_MISMATCH, f"{entry.key} is {self.size} bytes, manifest says {entry.size}"
        if self._hasher is not None:
            actual = f"{self._algorithm}:{self._hasher.hexdigest()}"
            if actual != entry.checksum:
                return (
                    Unavailable.CHECKSUM_MISMATCH,
                    f"{entry.key} has {actual}, manifest says {entry.checksum}",
                )
        return None


class S3PartitionStore:
    """Blocking result partitions on S3 (re-consumable until released) and pipelined scratch output.

    ``client`` is a boto3 S3 client or a zero-argument factory returning one, so the store needs no
    Airflow (``PartitionStoreHook`` builds one from an Airflow connection).
    """

    def __init__(
        self,
        client: Any,
        url: str,
        *,
        cache: LocalPartitionCache | str | os.PathLike[str] | None = None,
        checksum: str = DEFAULT_CHECKSUM,
        transfer_config: TransferConfig | None = None,
        retention: float = DEFAULT_RETENTION,
        orphan_grace: float = DEFAULT_ORPHAN_GRACE,
        clock: Clock | None = None,
        on_step: StepHook | None = None,
        max_workers: int = 8,
        credentials: str = DEFAULT_CREDENTIALS,
        allow_unconditional_writes: bool = False,
    ) -> None:
        self.layout = StoreLayout.from_url(url)
        self.credentials = credentials  # whose credentials the client uses, named in error hints
        if not isinstance(allow_unconditional_writes, bool):
            raise ValueError(
                f"allow_unconditional_writes must be True or False, got {allow_unconditional_writes!r}"
            )
        # Unsafe: go on when the endpoint ignores If-None-Match / If-Match (see require_conditional_writes).
        self.allow_unconditional_writes = allow_unconditional_writes
        self._client_or_factory = client
        self._client: Any = None
        self._client_lock = threading.Lock()
        if cache is not None and not isinstance(cache, LocalPartitionCache):
            cache = LocalPartitionCache(cache)
        self.cache = cache
        self.checksum = check_algorithm(checksum)
        self.transfer_config = transfer_config or default_transfer_config()
        for name, value in (("retention", retention), ("orphan_grace", orphan_grace)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number of seconds ≥ 0, got {value!r}")
        self.retention = float(retention)
        self.orphan_grace = float(orphan_grace)
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be an integer ≥ 1, got {max_workers!r}")
        self.max_workers = max_workers
        self._clock = clock or SystemClock()
        self._on_step = on_step

    # -- plumbing ---------------------------------------------------------------------------------
    @property
    def bucket(self) -> str:
        return self.layout.bucket

    @property
    def client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                c = self._client_or_factory
                self._client = c if hasattr(c, "put_object") else c()
            return self._client

    @property
    def json_objects(self) -> ConditionalJsonStore:
        """The compare-and-swap primitive on this store's bucket, for state kept beside partitions."""
        return self._objects()

    def _objects(self, **kwargs: Any) -> ConditionalJsonStore:
        return ConditionalJsonStore(
            self.client, self.bucket, credentials=self.credentials, probe_prefix=self.layout.prefix,
            allow_unconditional_writes=self.allow_unconditional_writes, **kwargs,
        )

    def require_conditional_writes(self) -> None:
        """Fail (ConditionalWritesUnsupported) unless the endpoint enforces conditional PUTs; probed once
        per endpoint and bucket per process, with an object under the store's prefix that is removed."""
        require_conditional_writes(
            self.client, self.bucket, self.layout.prefix,
            allow_unconditional=self.allow_unconditional_writes, credentials=self.credentials,
        )

    def _s3_errors(self, operation: str, key: str | None) -> Any:
        return s3_errors(operation, self.bucket, key, credentials=self.credentials)

    def _step(self, step: str, **info: Any) -> None:
        if self._on_step is not None:
            self._on_step(step, info)

    def _blocking(self, ref: PartitionRef) -> _Location:
        return _Location(ref, "blocking", self.layout.partition_prefix(ref))

    def _scratch(self, ref: PartitionRef, execution_id: str) -> _Location:
        return _Location(ref, "pipelined", self.layout.scratch_prefix(ref, execution_id))

    def check_connection(self) -> None:
        """One small listing of the prefix; a PartitionStoreError names the problem (bucket, keys, endpoint).

        Not HeadBucket: a HEAD response has no body, so S3 could only say 403 or 404, not why.
        """
        with self._s3_errors("ListObjectsV2", self.layout.prefix or None):
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.layout.prefix, MaxKeys=1)

    # -- commit -----------------------------------------------------------------------------------
    def commit(
        self,
        ref: PartitionRef,
        source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        *,
        producer: Producer,
        format: str = "parquet",
        compression: str = "snappy",
        row_count: int | None = None,
    ) -> Manifest:
        """Upload a directory (or list) of files as blocking partition ``ref`` and publish its manifest.

        In a directory, names starting with '_' or '.' (``_SUCCESS``, ``.crc``, ``_temporary``) are
        skipped, as Spark and Hadoop do. Raises StaleCommitError when a newer try already committed.
        """
        return self._commit(self._blocking(ref), source, producer, format, compression, row_count)

    def commit_scratch(
        self,
        ref: PartitionRef,
        execution_id: str,
        source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        *,
        producer: Producer,
        format: str = "parquet",
        compression: str = "snappy",
        row_count: int | None = None,
    ) -> Manifest:
        """A pipelined partition: readable only by the same region execution (``execution_id``)."""
        return self._commit(
            self._scratch(ref, execution_id), source, producer, format, compression, row_count
        )

    def _commit(
        self,
        loc: _Location,
        source: Any,
        producer: Producer,
        fmt: str,
        compression: str,
        row_count: int | None,
    ) -> Manifest:
        if not isinstance(producer, Producer):
            raise ValueError(f"producer must be a Producer(task_id, map_index, try_number), got {producer!r}")
        check_codec("format", fmt)
        check_codec("compression", compression)
        if row_count is not None and (
            isinstance(row_count, bool) or not isinstance(row_count, int) or row_count < 0
        ):
            raise ValueError(f"row_count must be None or an integer ≥ 0, got {row_count!r}")
        files = _source_files(source)
        attempt_id = new_attempt_id(producer.try_number)
        manifest = self._publish_attempt(
            loc, attempt_id, lambda: self._upload(files, loc.prefix, attempt_id), producer, fmt, compression, row_count
        )
        if self.cache is not None:
            for (_, path), entry in zip(files, manifest.files):
                self.cache.add(path, self.bucket, loc.prefix + entry.key)
        return manifest

    def _location(self, ref: PartitionRef, execution_id: str | None) -> _Location:
        return self._blocking(ref) if execution_id is None else self._scratch(ref, execution_id)

    def attempt_location(self, ref: PartitionRef, attempt_id: str, *, execution_id: str | None = None) -> str:
        """``s3://`` prefix where a writer that talks to S3 itself (Spark with s3a) puts an attempt's
        files; with ``execution_id``, of the pipelined (scratch) partition of that execution."""
        prefix = self._location(ref, execution_id).prefix
        return f"s3://{self.bucket}/{prefix}{attempt_dir(check_name('attempt id', attempt_id))}"

    def remote_files(self, ref: PartitionRef, *, execution_id: str | None = None) -> tuple[Manifest, list[str]]:
        """The partition's data objects as ``s3://`` URIs, for readers that read S3 themselves (Spark
        with s3a), after one LIST shows each listed object with its listed size. Raises
        PartitionNotFound like fetch(); checksums are left to the reader's own integrity checks."""
        loc = self._location(ref, execution_id)
        manifest = self._manifest(loc)
        attempt_prefix = loc.prefix + attempt_dir(manifest.attempt_id)
        with self._s3_errors("ListObjectsV2", attempt_prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=attempt_prefix)
            sizes = {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", ())}
        for entry in manifest.files:
            key = loc.prefix + entry.key
            if key not in sizes:
                raise PartitionNotFound(ref.partition_id, Unavailable.MISSING_OBJECT, f"s3://{self.bucket}/{key} is gone",
                                        run=str(ref.run))
            if sizes[key] != entry.size:
                raise PartitionNotFound(ref.partition_id, Unavailable.SIZE_MISMATCH,
                                        f"s3://{self.bucket}/{key} has {sizes[key]} bytes, the manifest {entry.size}",
                                        run=str(ref.run))
        return manifest, [f"s3://{self.bucket}/{loc.prefix}{entry.key}" for entry in manifest.files]

    def commit_uploaded(
        self,
        ref: PartitionRef,
        attempt_id: str,
        *,
        producer: Producer,
        format: str = "parquet",
        compression: str = "snappy",
        row_count: int | None = None,
        execution_id: str | None = None,
    ) -> Manifest:
        """Publish the files another writer already put under ``attempt_location(ref, attempt_id)``.

        Each object is read back once to checksum it (S3 ETags of multipart uploads are not content
        hashes); names starting with '_' or '.' are skipped, as Hadoop does. Same fencing as commit().
        A file name readers would reject is a ValueError before anything is published or deleted.
        """
        loc = self._location(ref, execution_id)
        objects = self._uploaded_objects(loc.prefix + attempt_dir(attempt_id))
        return self._publish_attempt(
            loc, attempt_id, lambda: self._checksum_uploaded(loc.prefix, attempt_id, objects), producer,
            format, compression, row_count,
        )

    def _uploaded_objects(self, attempt_prefix: str) -> list[dict[str, Any]]:
        """The data objects of an attempt, each name checked with the rule manifests are read with."""
        with self._s3_errors("ListObjectsV2", attempt_prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=attempt_prefix)
            objects = [o for page in pages for o in page.get("Contents", ())]
        data = []
        for obj in sorted(objects, key=lambda o: o["Key"]):
            name = obj["Key"][len(attempt_prefix):]
            if "/" in name or name.startswith(("_", ".")):
                continue
            try:
                check_relative_path("file name", name)
            except ValueError as exc:
                raise ValueError(
                    f"cannot publish s3://{self.bucket}/{obj['Key']}: {exc}. Readers would reject the "
                    "partition, so nothing was published; make the writer name its files that way (or delete "
                    "this object) and commit again"
                ) from None
            data.append(obj)
        return data

    def _checksum_uploaded(
        self, prefix: str, attempt_id: str, objects: list[dict[str, Any]]
    ) -> list[FileEntry]:
        attempt_prefix = prefix + attempt_dir(attempt_id)
        entries = []
        for obj in objects:
            name = obj["Key"][len(attempt_prefix):]
            hasher = new_hasher(self.checksum)
            with self._s3_errors("GetObject", obj["Key"]):
                body = self.client.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"]
                for chunk in iter(lambda: body.read(1 << 20), b""):
                    hasher.update(chunk)
            entries.append(FileEntry(attempt_dir(attempt_id) + name, obj["Size"], f"{self.checksum}:{hasher.hexdigest()}"))
        if not entries:
            raise PartitionStoreError(
                f"no data files under s3://{self.bucket}/{attempt_prefix}; the writer produced nothing",
                bucket=self.bucket, key=attempt_prefix, code=None, operation="commit_uploaded",
            )
        return entries

    def _publish_attempt(self, loc: _Location, attempt_id: str, write_files: Callable[[], list[FileEntry]],
                         producer: Producer, fmt: str, compression: str, row_count: int | None) -> Manifest:
        """Write (or checksum) an attempt's files, then publish its manifest; a failure before the
        manifest PUT removes the attempt's data, a stale try's too."""
        attempt_prefix = loc.prefix + attempt_dir(attempt_id)
        self.require_conditional_writes()  # before any data goes up: the manifest PUT needs it
        publishing = False
        try:
            entries = write_files()
            manifest = Manifest(
                pipeline=loc.ref.pipeline,
                run_id=loc.ref.run_id,
                result=loc.ref.result,
                map_index=loc.ref.map_index,  # type: ignore[arg-type]
                kind=loc.kind,
                attempt_id=attempt_id,
                producer=producer,
                files=tuple(entries),
                format=fmt,
                compression=compression,
                row_count=row_count,
                created_at=round(self._clock.now(), 3),  # what the manifest keeps (ms)
            )
            publishing = True
            self._publish(loc, manifest)
            self._step("after_manifest_put", attempt_id=attempt_id)
        except StaleCommitError:
            self._delete_quietly(attempt_prefix)
            raise
        except BaseException:
            # If the manifest PUT itself failed, S3 may still have applied it (a lost response);
            # then the data is live, so leave it to cleanup_orphans, which checks the manifest.
            if not publishing:
                self._delete_quietly(attempt_prefix)
            raise
        log.info(
            "committed partition %s (%s, %d files, %d bytes, attempt %s)",
            loc.ref,
            loc.kind,
            len(entries),
            manifest.total_size,
            attempt_id,
        )
        return manifest

    def _upload(self, files: list[tuple[str, Path]], prefix: str, attempt_id: str) -> list[FileEntry]:
        from boto3.s3.transfer import create_transfer_manager

        keys = [f"{attempt_dir(attempt_id)}{name}" for name, _ in files]
        sizes = [path.stat().st_size for _, path in files]
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="ft-hash") as hashers:
            checksums = [hashers.submit(file_checksum, path, self.checksum) for _, path in files]
            transfers = _Transfers(create_transfer_manager(self.client, self.transfer_config))
            with transfers.manager:
                for i, (_, path) in enumerate(files):
                    transfers.manager.upload(
                        str(path), self.bucket, prefix + keys[i], subscribers=[transfers.subscriber(i)]
                    )
                for uploaded in range(1, len(files) + 1):
                    i, future = transfers.done.get()
                    with self._s3_errors("PutObject", prefix + keys[i]):
                        future.result()
                    self._step("file_uploaded", uploaded=uploaded, total=len(files), key=keys[i])
            self._step("files_uploaded", total=len(files))
            entries = [FileEntry(keys[i], sizes[i], checksums[i].result()) for i in range(len(files))]
        for (_, path), entry in zip(files, entries):
            if path.stat().st_size != entry.size:
                raise RuntimeError(
                    f"{path} changed size while it was being committed; finish writing it first"
                )
        return entries

    def _publish(self, loc: _Location, manifest: Manifest) -> None:
        data = manifest.to_json()
        rounds = 0

        def change(current: bytes | None) -> bytes:
            nonlocal rounds
            rounds += 1
            if current is not None:
                try:
                    existing = Manifest.from_json(current, expected=loc.ref, kind=loc.kind)
                except InvalidManifest as exc:
                    log.warning("replacing invalid manifest of %s: %s", loc.ref, exc)
                else:
                    if existing.producer.try_number > manifest.producer.try_number:
                        raise StaleCommitError(
                            loc.ref.partition_id,
                            manifest.producer.try_number,
                            existing.producer.try_number,
                            existing.attempt_id,
                        )
            self._step(
                "before_manifest_put",
                attempt_id=manifest.attempt_id,
                round=rounds,
                replaces=current is not None,
            )
            return data

        # An oversized object at the manifest key is invalid like any other: read its head, replace it.
        self._objects(max_bytes=MAX_MANIFEST_BYTES).update_raw(
            loc.manifest_key, change, oversized="truncate")

    # -- read -------------------------------------------------------------------------------------
    def manifest(self, ref: PartitionRef) -> Manifest:
        """The committed manifest of a blocking partition; PartitionNotFound when missing or invalid."""
        return self._manifest(self._blocking(ref))

    def _manifest_bytes(self, key: str) -> Versioned[bytes] | None:
        """The object at a manifest key. An oversized one comes back cut short, so that it parses as
        an invalid manifest (which the next commit replaces) rather than failing the caller."""
        return self._objects(max_bytes=MAX_MANIFEST_BYTES).get_bytes(key, oversized="truncate")

    def _manifest(self, loc: _Location) -> Manifest:
        raw = self._manifest_bytes(loc.manifest_key)
        if raw is None:
            raise PartitionNotFound(
                loc.ref.partition_id,
                Unavailable.MISSING_MANIFEST,
                f"no s3://{self.bucket}/{loc.manifest_key}",
                run=str(loc.ref.run),
            )
        try:
            return Manifest.from_json(raw.value, expected=loc.ref, kind=loc.kind)
        except InvalidManifest as exc:
            raise PartitionNotFound(
                loc.ref.partition_id, Unavailable.INVALID_MANIFEST, str(exc), run=str(loc.ref.run)
            ) from None

    def fetch(
        self, ref: PartitionRef, dest: str | os.PathLike[str] | None = None, *, verify: bool = True
    ) -> FetchedPartition:
        """The partition's files on local disk, each checked against the manifest (size, checksum).

        With a local cache, verified cached files are used and anything else is downloaded from S3
        and repaired in the cache; ``dest`` (a directory) then gets a copy under the files' names.
        Raises PartitionNotFound when the partition is missing or fails its integrity check.
        """
        loc = self._blocking(ref)
        return self._fetch(loc, self._manifest(loc), dest, verify)

    def fetch_scratch(
        self,
        ref: PartitionRef,
        execution_id: str,
        dest: str | os.PathLike[str] | None = None,
        *,
        verify: bool = True,
    ) -> FetchedPartition:
        """A pipelined partition written by the same region execution; no other execution may read it."""
        loc = self._scratch(ref, execution_id)
        return self._fetch(loc, self._manifest(loc), dest, verify)

    def _fetch(self, loc: _Location, manifest: Manifest, dest: Any, verify: bool) -> FetchedPartition:
        from boto3.s3.transfer import create_transfer_manager

        if dest is None and self.cache is None:
            raise ValueError("fetch needs dest= (a directory) when the store has no local cache")
        dest_dir = Path(dest) if dest is not None else None
        # Checked before anything is written: every file lands inside dest (names are validated, but
        # a symlink already in dest could still point elsewhere).
        targets = [_inside(dest_dir, entry.name) for entry in manifest.files] if dest_dir is not None else []
        paths: list[Path | None] = [None] * len(manifest.files)
        todo: list[tuple[int, FileEntry, str, Path]] = []
        hits = 0
        for i, entry in enumerate(manifest.files):
            key = loc.prefix + entry.key
            if self.cache is not None:
                cached = self.cache.lookup(self.bucket, key, entry)
                if cached is not None:
                    paths[i] = cached
                    hits += 1
                    continue
                temp = self.cache.temp_path(self.bucket, key)
            else:
                final = targets[i]
                final.parent.mkdir(parents=True, exist_ok=True)
                temp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
            todo.append((i, entry, key, temp))

        writers = [_HashingWriter(temp, entry.checksum if verify else None) for _, entry, _, temp in todo]
        try:
            if todo:
                transfers = _Transfers(create_transfer_manager(self.client, self.transfer_config))
                with transfers.manager:
                    for n, (_, entry, key, _) in enumerate(todo):
                        # A write-only target makes s3transfer hand over the bytes in order, so they
                        # are checksummed as they arrive instead of being read back from disk.
                        transfers.manager.download(
                            self.bucket, key, writers[n], subscribers=[transfers.subscriber(n, entry.size)]
                        )
                    for _ in todo:
                        n, future = transfers.done.get()
                        self._download_result(loc, todo[n][2], future)
                        writers[n].close()
                        problem = writers[n].problem(todo[n][1])
                        if problem is not None:
                            raise PartitionNotFound(
                                loc.ref.partition_id, problem[0], problem[1], run=str(loc.ref.run)
                            )
            for i, _, key, temp in todo:
                if self.cache is not None:
                    paths[i] = self.cache.install(temp, self.bucket, key)
                else:
                    paths[i] = targets[i]
                    os.replace(temp, targets[i])
        finally:
            for writer, (_, _, _, temp) in zip(writers, todo):
                writer.close()
                temp.unlink(missing_ok=True)

        if dest_dir is not None and self.cache is not None:
            for i, target in enumerate(targets):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                try:
                    os.link(paths[i], target)  # type: ignore[arg-type]
                except OSError:
                    shutil.copyfile(paths[i], target)  # type: ignore[arg-type]
                paths[i] = target
        return FetchedPartition(manifest, tuple(p for p in paths if p is not None), hits, len(todo))

    def _download_result(self, loc: _Location, key: str, future: Any) -> None:
        from botocore.exceptions import ClientError

        with self._s3_errors("GetObject", key):
            try:
                future.result()
            except ClientError as exc:
                code = error_code(exc)
                if code in MISSING_CODES:
                    raise PartitionNotFound(
                        loc.ref.partition_id,
                        Unavailable.MISSING_OBJECT,
                        f"s3://{self.bucket}/{key} is gone",
                        run=str(loc.ref.run),
                    ) from None
                if code in ("InvalidRange", "416"):
                    raise PartitionNotFound(
                        loc.ref.partition_id,
                        Unavailable.SIZE_MISMATCH,
                        f"s3://{self.bucket}/{key} is shorter than the manifest says",
                        run=str(loc.ref.run),
                    ) from None
                raise

    # -- availability -----------------------------------------------------------------------------
    def check_availability(
        self,
        pipeline: str,
        run_id: str,
        partitions: Iterable[str | PartitionRef],
        *,
        pipelined: Iterable[str | PartitionRef] = (),
        deep: bool = False,
    ) -> AvailabilityReport:
        """Which of a run's partitions can be consumed again, and why the others cannot.

        One paginated listing of the run's blocking prefix plus one GET per manifest (in parallel),
        not a HEAD per object. ``pipelined`` partitions are always unavailable. ``deep`` also reads
        every object back and checks its checksum.
        """
        run = RunRef(pipeline, run_id)
        refs = [run.parse(p) for p in partitions]
        unavailable: dict[str, UnavailablePartition] = {}
        for p in pipelined:
            pid = run.parse(p).partition_id
            unavailable[pid] = UnavailablePartition(
                pid, Unavailable.PIPELINED, "pipelined partitions are not kept after a failure"
            )
        listing = self._list(self.layout.blocking_prefix(run)) if refs else {}
        manifests: dict[str, Manifest] = {}

        def check(ref: PartitionRef) -> UnavailablePartition | None:
            loc = self._blocking(ref)
            if loc.manifest_key not in listing:
                return UnavailablePartition(ref.partition_id, Unavailable.MISSING_MANIFEST)
            try:
                manifest = self._manifest(loc)
            except PartitionNotFound as exc:
                return UnavailablePartition(ref.partition_id, exc.reason, exc.detail)
            manifests[ref.partition_id] = manifest
            for entry in manifest.files:
                key = loc.prefix + entry.key
                info = listing.get(key) or self._head(key)  # a HEAD only if written after the listing
                if info is None:
                    return UnavailablePartition(
                        ref.partition_id, Unavailable.MISSING_OBJECT, f"{entry.key} is gone"
                    )
                if info.size != entry.size:
                    return UnavailablePartition(
                        ref.partition_id,
                        Unavailable.SIZE_MISMATCH,
                        f"{entry.key} is {info.size} bytes, manifest says {entry.size}",
                    )
            if deep:
                for entry in manifest.files:
                    actual = self._remote_checksum(loc.prefix + entry.key, entry.checksum)
                    if actual is None:
                        return UnavailablePartition(
                            ref.partition_id, Unavailable.MISSING_OBJECT, f"{entry.key} is gone"
                        )
                    if actual != entry.checksum:
                        return UnavailablePartition(
                            ref.partition_id,
                            Unavailable.CHECKSUM_MISMATCH,
                            f"{entry.key} has {actual}, manifest says {entry.checksum}",
                        )
            return None

        with ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="ft-check") as pool:
            for ref, problem in zip(refs, pool.map(check, refs)):
                if problem is not None:
                    unavailable[ref.partition_id] = problem
        available = frozenset(ref.partition_id for ref in refs) - set(unavailable)
        return AvailabilityReport(run, available, unavailable, manifests)

    def check_graph(
        self, graph: StageGraph, pipeline: str, run_id: str, *, deep: bool = False
    ) -> AvailabilityReport:
        """Availability of every partition of a pipeline graph (its pipelined results are unavailable)."""
        blocking, pipelined = [], []
        for result in graph.results.values():
            (blocking if result.result_type.is_reconsumable else pipelined).extend(
                graph.partition_ids(result.name)
            )
        return self.check_availability(pipeline, run_id, blocking, pipelined=pipelined, deep=deep)

    def _head(self, key: str) -> _ObjectInfo | None:
        from botocore.exceptions import ClientError

        with self._s3_errors("HeadObject", key):
            try:
                response = self.client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if error_code(exc) in MISSING_CODES:
                    return None
                raise
        return _ObjectInfo(response["ContentLength"], response["LastModified"].timestamp())

    def _remote_checksum(self, key: str, expected: str) -> str | None:
        from botocore.exceptions import ClientError

        hasher = new_hasher(expected)
        with self._s3_errors("GetObject", key):
            try:
                body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            except ClientError as exc:
                if error_code(exc) in MISSING_CODES:
                    return None
                raise
            with body:
                for chunk in body.iter_chunks(MiB):
                    hasher.update(chunk)
        return f"{expected.partition(':')[0]}:{hasher.hexdigest()}"

    # -- consumers and release --------------------------------------------------------------------
    def register_consumer(
        self,
        pipeline: str,
        run_id: str,
        consumer: str,
        *,
        partitions: Iterable[str | PartitionRef] | None = None,
        ttl: float | None = None,
    ) -> Lease:
        """Declare that ``consumer`` (e.g. a task id) may still read these partitions (None: all).

        Registering again refreshes the lease. Refused once a release of the partitions has started.
        """
        run = RunRef(pipeline, run_id)
        check_encoded_name("consumer", consumer)
        pids = None if partitions is None else tuple(sorted({run.parse(p).partition_id for p in partitions}))
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0):
            raise ValueError(f"lease ttl must be None (until unregistered) or seconds > 0, got {ttl!r}")
        now = self._clock.now()
        lease = Lease(consumer, pids, now, None if ttl is None else now + ttl)
        self._refuse_if_releasing(run, consumer, pids)
        key = self.layout.lease_key(run, consumer)
        self._put_json(
            key,
            {
                "consumer": consumer,
                "partitions": None if pids is None else list(pids),
                "registered_at": lease.registered_at,
                "expires_at": lease.expires_at,
            },
        )
        # Release writes its marker, then lists leases; we write the lease, then read the marker.
        # With S3's strong consistency one of the two sees the other, so they never both proceed.
        try:
            self._refuse_if_releasing(run, consumer, pids)
        except ConsumerRegistrationRefused:
            self._delete_keys([key])
            raise
        return lease

    def unregister_consumer(self, pipeline: str, run_id: str, consumer: str) -> None:
        run = RunRef(pipeline, run_id)
        self._delete_keys([self.layout.lease_key(run, consumer)])

    def consumers(self, pipeline: str, run_id: str, *, include_expired: bool = False) -> list[Lease]:
        run = RunRef(pipeline, run_id)
        prefix = self.layout.leases_prefix(run)
        now = self._clock.now()
        leases = []
        for key in sorted(self._list(prefix)):
            raw = self.json_objects.get_bytes(key, oversized="truncate")  # too big: invalid, so blocking
            if raw is None:
                continue
            lease = _parse_lease(raw.value, fallback=_decode_lease_name(key[len(prefix) :]))
            if include_expired or lease.active(now):
                leases.append(lease)
        return leases

    def release_run(
        self,
        pipeline: str,
        run_id: str,
        *,
        partitions: Iterable[str | PartitionRef] | None = None,
        reason: str = "explicit request",
    ) -> ReleaseReport:
        """Delete a run's partitions (all, or the blocking ones named) unless a consumer still needs them.

        Raises ReleaseRefused, deleting nothing, while an active lease covers any of them.
        """
        run = RunRef(pipeline, run_id)
        pids = None if partitions is None else tuple(sorted({run.parse(p).partition_id for p in partitions}))
        self._refuse_if_leased(run, pids)
        marker = self.layout.marker_key(run, "releasing")
        self._put_json(
            marker,
            {"partitions": None if pids is None else list(pids), "at": self._clock.now(), "reason": reason},
        )
        try:
            self._refuse_if_leased(run, pids)
        except ReleaseRefused:
            self._delete_keys([marker])
            raise
        run_prefix = self.layout.run_prefix(run)
        if pids is None:
            keys = [k for k in self._list(run_prefix) if k != marker]
            self._abort_uploads(run_prefix, older_than=None)
        else:
            keys = [k for pid in pids for k in self._list(self.layout.partition_prefix(run.parse(pid)))]
        self._delete_keys(keys)
        if pids is None:
            self._put_json(
                self.layout.marker_key(run, "released"), {"at": self._clock.now(), "reason": reason}
            )
        self._delete_keys([marker])
        if self.cache is not None:
            if pids is None:
                self.cache.evict(self.bucket, run_prefix)
            else:
                for pid in pids:
                    self.cache.evict(self.bucket, self.layout.partition_prefix(run.parse(pid)))
        log.info(
            "released %s of run %s (%d objects): %s",
            "all partitions" if pids is None else list(pids),
            run,
            len(keys),
            reason,
        )
        return ReleaseReport(run, pids, len(keys), reason)

    def pipelines(self) -> list[str]:
        """The pipelines (DAG ids) that have data in this store; folders that are not valid names are not ours."""
        names = []
        for prefix in self._list_prefixes(self.layout.prefix):
            name = prefix[len(self.layout.prefix):].rstrip("/")
            try:
                names.append(check_name("pipeline (DAG id)", name))
            except ValueError:
                continue
        return names

    def runs(self, pipeline: str) -> list[RunRef]:
        """The runs of ``pipeline`` that have data in this store."""
        runs = []
        for prefix in self._list_prefixes(self.layout.pipeline_prefix(pipeline)):
            try:
                runs.append(self.layout.run_from_prefix(pipeline, prefix))
            except ValueError:
                continue  # not a run directory of ours
        return runs

    def modified_times(self, prefix: str) -> dict[str, float]:
        """Every key under ``prefix`` (inside this store) with its last-modified time (epoch seconds)."""
        if not prefix.startswith(self.layout.prefix):
            raise ValueError(f"{prefix!r} is outside the store's prefix {self.layout.prefix!r}")
        return {key: info.last_modified for key, info in self._list(prefix).items()}

    def delete_keys(self, keys: Iterable[str]) -> int:
        """Delete keys inside this store (releases of data nobody reads again); how many."""
        keys = list(keys)
        outside = [k for k in keys if not k.startswith(self.layout.prefix)]
        if outside:
            raise ValueError(f"{outside[0]!r} is outside the store's prefix {self.layout.prefix!r}")
        self._delete_keys(keys)
        return len(keys)

    def release_scratch(self, pipeline: str, run_id: str, execution_id: str) -> int:
        """Delete the pipelined partitions of one region execution (they are never read again)."""
        keys = list(self._list(self.layout.scratch_execution_prefix(RunRef(pipeline, run_id), execution_id)))
        self._delete_keys(keys)
        return len(keys)

    def mark_run_succeeded(self, pipeline: str, run_id: str, *, at: float | None = None) -> None:
        """Start the retention clock of a finished run (``release_expired_runs`` acts on it)."""
        run = RunRef(pipeline, run_id)
        self._put_json(
            self.layout.marker_key(run, "succeeded"), {"at": self._clock.now() if at is None else at}
        )

    def release_expired_runs(self, pipeline: str) -> list[RetentionOutcome]:
        """Release each succeeded run of a pipeline whose retention has passed; skip the others, saying
        why. One outcome per run with data in the store."""
        outcomes = []
        now = self._clock.now()
        for run in self.runs(pipeline):
            markers = {k.rsplit("/", 1)[-1]: k for k in self._list(self.layout.run_prefix(run) + "_run/")}
            if "released.json" in markers:
                outcomes.append(RetentionOutcome(run, False, ALREADY_RELEASED))
                continue
            if "succeeded.json" not in markers:
                outcomes.append(RetentionOutcome(run, False, NOT_SUCCEEDED))
                continue
            try:
                succeeded_at = self._marker_time(markers["succeeded.json"])
            except ValueError as exc:
                # One damaged marker must neither release its run early nor stop the sweep.
                outcomes.append(RetentionOutcome(run, False, str(exc)))
                continue
            left = (now if succeeded_at is None else succeeded_at) + self.retention - now
            if left > 0:
                outcomes.append(RetentionOutcome(run, False, f"retention not over ({left:.0f} s left)"))
                continue
            try:
                self.release_run(pipeline, run.run_id, reason=f"retention of {self.retention:.0f} s passed")
            except ReleaseRefused as exc:
                outcomes.append(RetentionOutcome(run, False, str(exc)))
            else:
                outcomes.append(RetentionOutcome(run, True, "retention passed"))
        return outcomes

    def _marker_time(self, key: str) -> float | None:
        """The ``at`` of a life-cycle marker (None if it is gone); ValueError naming the key if invalid."""
        raw = self.json_objects.get_bytes(key, oversized="truncate")
        if raw is None:
            return None
        try:
            doc = load_json(raw.value, max_bytes=MAX_MARKER_BYTES)
            if not isinstance(doc, dict):
                raise ValueError(f"expected an object, got {type(doc).__name__}")
            return _finite(doc.get("at"), "at")
        except ValueError as exc:
            raise ValueError(
                f"run marker s3://{self.bucket}/{key} is invalid ({exc}); not releasing the run: write "
                '{"at": <seconds since the epoch>} there, or delete it and mark the run succeeded again'
            ) from None

    def _refuse_if_leased(self, run: RunRef, pids: tuple[str, ...] | None) -> None:
        blocking = [
            lease.consumer for lease in self.consumers(run.pipeline, run.run_id) if lease.covers(pids)
        ]
        if blocking:
            raise ReleaseRefused(str(run), blocking, None if pids is None else list(pids))

    def _refuse_if_releasing(self, run: RunRef, consumer: str, pids: tuple[str, ...] | None) -> None:
        store = self.json_objects
        for marker in ("released", "releasing"):
            key = self.layout.marker_key(run, marker)
            raw = store.get_bytes(key, oversized="truncate")
            if raw is None:
                continue
            released = _released_partitions(raw.value)  # None: all (also when the marker is damaged)
            if marker == "released" or released is None or pids is None or set(released) & set(pids):
                raise ConsumerRegistrationRefused(
                    f"consumer {consumer!r} cannot register on run {run}: its partitions "
                    f"{'were' if marker == 'released' else 'are being'} released (s3://{self.bucket}/{key}); "
                    "re-run the producers (a new run) instead"
                )

    # -- clean-up ---------------------------------------------------------------------------------
    def cleanup_orphans(self, pipeline: str, run_id: str, *, grace: float | None = None) -> OrphanReport:
        """Delete attempt data that no manifest references (crashed, fenced or superseded commits).

        Only attempts whose newest object is older than ``grace`` (default ``orphan_grace``) go, so an
        in-flight commit and readers of a just-replaced manifest are left alone. Also aborts stale
        multipart uploads of killed commits.
        """
        run = RunRef(pipeline, run_id)
        grace = self.orphan_grace if grace is None else grace
        cutoff = self._clock.now() - grace
        run_prefix = self.layout.run_prefix(run)
        # partition prefix -> {attempt id -> (keys, newest mtime)}; and partition prefixes with a manifest
        attempts: dict[str, dict[str, tuple[list[str], float]]] = {}
        manifests: set[str] = set()
        for key, info in self._list(run_prefix).items():
            rest = key[len(run_prefix) :]
            parts = rest.split("/")
            if parts[0] == "blocking" and len(parts) >= 4:
                base = 4
            elif parts[0] == "scratch" and len(parts) >= 5:
                base = 5
            else:
                continue
            partition_prefix = run_prefix + "/".join(parts[: base - 1]) + "/"
            tail = parts[base - 1 :]
            if tail == [MANIFEST_NAME]:
                manifests.add(partition_prefix)
            elif len(tail) >= 3 and tail[0] == ATTEMPTS_DIR:
                keys, newest = attempts.setdefault(partition_prefix, {}).get(tail[1], ([], 0.0))
                keys.append(key)
                attempts[partition_prefix][tail[1]] = (keys, max(newest, info.last_modified))
        doomed: list[str] = []
        kept: list[str] = []
        for partition_prefix, by_attempt in attempts.items():
            current = self._current_attempt(partition_prefix) if partition_prefix in manifests else None
            for attempt_id, (keys, newest) in by_attempt.items():
                if attempt_id == current:
                    continue
                if newest <= cutoff:
                    doomed.extend(keys)
                else:
                    kept.append(f"{partition_prefix}{ATTEMPTS_DIR}/{attempt_id}/")
        self._delete_keys(doomed)
        # An upload into an attempt that is still in flight belongs to that commit (S3's Initiated
        # time alone would do, but S3-compatible stores do not all report it faithfully).
        aborted = self._abort_uploads(run_prefix, older_than=cutoff, keep_prefixes=tuple(kept))
        if doomed:
            log.info("deleted %d orphaned objects of run %s", len(doomed), run)
        return OrphanReport(run, tuple(sorted(doomed)), tuple(aborted), tuple(sorted(kept)))

    def _current_attempt(self, partition_prefix: str) -> str | None:
        raw = self._manifest_bytes(partition_prefix + MANIFEST_NAME)
        if raw is None:
            return None
        try:
            return Manifest.from_json(raw.value).attempt_id
        except InvalidManifest:
            return None

    # -- S3 helpers -------------------------------------------------------------------------------
    def _list(self, prefix: str) -> dict[str, _ObjectInfo]:
        objects: dict[str, _ObjectInfo] = {}
        with self._s3_errors("ListObjectsV2", prefix):
            for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            ):
                for obj in page.get("Contents", ()):
                    objects[obj["Key"]] = _ObjectInfo(obj["Size"], obj["LastModified"].timestamp())
        return objects

    def _list_prefixes(self, prefix: str) -> list[str]:
        prefixes: list[str] = []
        with self._s3_errors("ListObjectsV2", prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix, Delimiter="/"
            )
            for page in pages:
                prefixes.extend(p["Prefix"] for p in page.get("CommonPrefixes", ()))
        return prefixes

    def _put_json(self, key: str, value: Any) -> None:
        import json

        with self._s3_errors("PutObject", key):
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=json.dumps(value).encode("utf-8"),
                ContentType="application/json",
            )

    def _delete_keys(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            with self._s3_errors("DeleteObjects", batch[0]):
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                )
            errors = response.get("Errors") or []
            if errors:
                first = errors[0]
                raise PartitionStoreError(
                    f"S3 DeleteObjects failed for {len(errors)} of {len(batch)} keys, first s3://{self.bucket}/"
                    f"{first.get('Key')} with {first.get('Code')}: {first.get('Message', '')}",
                    bucket=self.bucket,
                    key=first.get("Key"),
                    code=first.get("Code"),
                    operation="DeleteObjects",
                )

    def _delete_quietly(self, prefix: str) -> None:
        """Best effort after a failed commit; orphan clean-up removes whatever is left."""
        try:
            self._delete_keys(list(self._list(prefix)))
        except Exception as exc:  # noqa: BLE001 - the original error matters more
            log.warning(
                "could not remove data of failed commit under s3://%s/%s: %s", self.bucket, prefix, exc
            )

    def _abort_uploads(
        self, prefix: str, *, older_than: float | None, keep_prefixes: tuple[str, ...] = ()
    ) -> list[str]:
        aborted = []
        with self._s3_errors("ListMultipartUploads", prefix):
            pages = self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=prefix
            )
            uploads = [u for page in pages for u in page.get("Uploads", ())]
        for upload in uploads:
            if older_than is not None and upload["Initiated"].timestamp() > older_than:
                continue
            if upload["Key"].startswith(keep_prefixes) and keep_prefixes:
                continue
            with self._s3_errors("AbortMultipartUpload", upload["Key"]):
                try:
                    self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
                except Exception as exc:
                    if error_code(exc) != "NoSuchUpload":
                        raise
            aborted.append(upload["Key"])
        return aborted

    def __repr__(self) -> str:
        return f"S3PartitionStore({self.layout.url!r}, cache={self.cache!r})"


def _source_files(source: Any) -> list[tuple[str, Path]]:
    """(name inside the partition, local path) pairs, sorted by name."""
    if isinstance(source, (str, os.PathLike)):
        root = Path(source)
        if not root.is_dir():
            raise ValueError(f"commit source {root} is not a directory; pass a directory or a list of files")
        files = []
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part.startswith(("_", ".")) for part in rel.parts) or not path.is_file():
                continue
            files.append((check_relative_path("file name", rel.as_posix()), path))
        return files
    files = []
    seen: set[str] = set()
    for item in source:
        path = Path(item)
        if not path.is_file():
            raise ValueError(f"commit source file {path} does not exist or is not a regular file")
        name = check_relative_path("file name", path.name)
        if name in seen:
            raise ValueError(
                f"two commit source files are named {name!r}; names must be unique in a partition"
            )
        seen.add(name)
        files.append((name, path))
    return sorted(files)


def _inside(root: Path, name: str) -> Path:
    """``root / name``, refused when it resolves outside ``root``."""
    path = root / name
    resolved, base = path.resolve(), root.resolve()
    if not resolved.is_relative_to(base):
        raise ValueError(
            f"refusing to write partition file {name!r} to {path}: it resolves to {resolved}, outside {base} "
            "(a symlink in the destination?); remove it or fetch into an empty directory"
        )
    return path


def _decode_lease_name(name: str) -> str:
    try:
        return decode_segment(name.removesuffix(".json"))
    except ValueError:
        return name


def _finite(value: object, name: str) -> float:
    """A JSON number that is a finite float (not a bool, not a string such as "nan")."""
    if not is_finite_number(value):
        raise ValueError(f"{name!r} must be a number of seconds since the epoch, got {reprlib.repr(value)}")
    return float(value)


def _names(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name!r} must be null or a list of partition ids, got {reprlib.repr(value)}")
    return tuple(value)


def _released_partitions(data: bytes) -> tuple[str, ...] | None:
    """What a release marker says is being released; None (everything) when it says so or is damaged."""
    try:
        doc = load_json(data, max_bytes=MAX_MARKER_BYTES)
        partitions = doc.get("partitions") if isinstance(doc, dict) else None
        return None if partitions is None else _names(partitions, "partitions")
    except ValueError:
        return None


def _parse_lease(data: bytes, *, fallback: str) -> Lease:
    """A lease that does not parse still blocks release (safe side), under its key's name."""
    try:
        doc = load_json(data, max_bytes=MAX_MARKER_BYTES)
        if not isinstance(doc, dict) or not isinstance(doc.get("consumer"), str):
            raise ValueError("expected an object with a 'consumer' string")
        partitions = doc.get("partitions")
        expires_at = doc.get("expires_at")
        return Lease(
            consumer=doc["consumer"],
            partitions=None if partitions is None else _names(partitions, "partitions"),
            registered_at=_finite(doc.get("registered_at", 0.0), "registered_at"),
            expires_at=None if expires_at is None else _finite(expires_at, "expires_at"),
        )
    except ValueError as exc:
        log.warning("lease %r does not parse (%s); it blocks every release of its run until deleted",
                    fallback, exc)
        return Lease(fallback, None, 0.0, None)
