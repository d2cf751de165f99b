"""What a writer other than this process put under an attempt (Spark's executors, s3a), read back for
its commit: the executors' record of the task attempts Spark committed, checked against a LIST, or
every data object listed and checksummed when there is no record."""

from __future__ import annotations

from dataclasses import dataclass

from ..safe_json import load_json
from ..spark.checksums import new_hasher
from ..spark.written import MAX_RECORD_BYTES, WRITTEN_RECORD, WrittenFile, written_files
from .errors import PartitionStoreError
from .manifest import FileEntry
from .naming import attempt_dir, check_relative_path
from .s3_client import ObjectBody
from .s3_objects import StoreObjects


@dataclass(frozen=True)
class ListedObject:
    """A data object found under an attempt: its full key and size."""

    key: str
    size: int


class ExternalWrites:
    """An attempt another writer filled, as manifest entries (``PartitionCommits.commit_uploaded``)."""

    def __init__(self, objects: StoreObjects) -> None:
        self.objects = objects

    def written_record(self, attempt_prefix: str) -> list[WrittenFile]:
        files = self.read_written_record(attempt_prefix)
        if files is None:
            key = attempt_prefix + WRITTEN_RECORD
            raise PartitionStoreError(
                f"no s3://{self.objects.bucket}/{key}: Spark did not finish the write (its driver "
                "records the committed task attempts' files there last)",
                bucket=self.objects.bucket,
                key=key,
                code=None,
                operation="commit_uploaded",
            )
        return files

    def read_written_record(self, attempt_prefix: str) -> list[WrittenFile] | None:
        """The executors' record under ``attempt_prefix`` (one GET), None if there is none yet."""
        key = attempt_prefix + WRITTEN_RECORD
        data = self.objects.read_object(key)
        if data is None:
            return None
        try:  # stored JSON: the limits every reader of the bucket applies, then the record's own checks
            return written_files(load_json(data, max_bytes=MAX_RECORD_BYTES))
        except ValueError as exc:
            raise ValueError(f"s3://{self.objects.bucket}/{key}: {exc}; nothing was published") from None

    def recorded_entries(
        self, attempt_prefix: str, attempt_id: str, files: list[WrittenFile]
    ) -> list[FileEntry]:
        listed = self.objects.list_under(attempt_prefix)
        for written in files:
            found = listed.get(attempt_prefix + written.key)
            if found is None or found.size != written.size:
                raise PartitionStoreError(
                    f"s3://{self.objects.bucket}/{attempt_prefix}{written.key} is "
                    f"{'missing' if found is None else f'{found.size} bytes'}; the executors recorded "
                    f"{written.size} bytes: nothing was published",
                    bucket=self.objects.bucket,
                    key=attempt_prefix + written.key,
                    code=None,
                    operation="commit_uploaded",
                )
        # The LIST that checked the sizes gives the ETags: the publish lists the attempt no second time
        etags = {f.key: listed[attempt_prefix + f.key].etag for f in files}
        return [FileEntry(attempt_dir(attempt_id) + f.key, f.size, f.checksum, etags[f.key]) for f in files]

    def uploaded_objects(self, attempt_prefix: str) -> list[ListedObject]:
        """The data objects of an attempt, each name checked with the rule manifests are read with."""
        with self.objects.s3_errors("ListObjectsV2", attempt_prefix):
            pages = self.objects.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.objects.bucket, Prefix=attempt_prefix
            )
            objects = [o for page in pages for o in page.get("Contents", ())]
        data = []
        for obj in sorted(objects, key=lambda o: o["Key"]):
            name = obj["Key"][len(attempt_prefix) :]
            if "/" in name or name.startswith(("_", ".")):
                continue
            try:
                check_relative_path("file name", name)
            except ValueError as exc:
                raise ValueError(
                    f"cannot publish s3://{self.objects.bucket}/{obj['Key']}: {exc}. Readers would reject "
                    "the partition, so nothing was published; make the writer name its files that way (or "
                    "delete this object) and commit again"
                ) from None
            data.append(ListedObject(obj["Key"], obj["Size"]))
        return data

    def checksum_uploaded(self, prefix: str, attempt_id: str, objects: list[ListedObject]) -> list[FileEntry]:
        attempt_prefix = prefix + attempt_dir(attempt_id)
        entries = []
        for obj in objects:
            name = obj.key[len(attempt_prefix) :]
            hasher = new_hasher(self.objects.checksum)
            with self.objects.s3_errors("GetObject", obj.key):
                answer = self.objects.client.get_object(Bucket=self.objects.bucket, Key=obj.key)
                body: ObjectBody = answer["Body"]
                with body:
                    for chunk in body.iter_chunks(1 << 20):
                        hasher.update(chunk)
            entries.append(
                FileEntry(
                    attempt_dir(attempt_id) + name,
                    obj.size,
                    f"{self.objects.checksum}:{hasher.hexdigest()}",
                )
            )
        if not entries:
            raise PartitionStoreError(
                f"no data files under s3://{self.objects.bucket}/{attempt_prefix}; "
                "the writer produced nothing",
                bucket=self.objects.bucket,
                key=attempt_prefix,
                code=None,
                operation="commit_uploaded",
            )
        return entries
