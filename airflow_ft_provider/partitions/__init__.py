"""Result partitions on S3: blocking partitions committed with a manifest and re-readable until released.

Pure Python over a boto3 S3 client (no Airflow import); ``airflow_ft_provider.hooks.partition_store``
builds the client from an Airflow connection. pyarrow is imported only by the Parquet helpers.
"""

from .cache import LocalPartitionCache
from .conditional import (
    ConditionalJsonStore,
    ConditionalWriteConflict,
    ConditionalWritesUnsupported,
    Versioned,
)
from .errors import (
    ConsumerRegistrationRefused,
    PartitionNotFound,
    PartitionStoreError,
    ReleaseRefused,
    StaleCommitError,
    Unavailable,
)
from .manifest import SCHEMA_VERSION, FileEntry, InvalidManifest, Manifest, Producer, file_checksum
from .naming import UNMAPPED, PartitionRef, RunRef, StoreLayout, partition_id
from .parquet import PARQUET_CODECS, commit_table, read_parquet, read_table, write_parquet
from .store import (
    AvailabilityReport,
    FetchedPartition,
    Lease,
    OrphanReport,
    ReleaseReport,
    RetentionOutcome,
    S3PartitionStore,
    UnavailablePartition,
    default_transfer_config,
)
from .upload import StoredCopy

__all__ = [
    "PARQUET_CODECS",
    "SCHEMA_VERSION",
    "UNMAPPED",
    "AvailabilityReport",
    "ConditionalJsonStore",
    "ConditionalWriteConflict",
    "ConditionalWritesUnsupported",
    "ConsumerRegistrationRefused",
    "FetchedPartition",
    "FileEntry",
    "InvalidManifest",
    "Lease",
    "LocalPartitionCache",
    "Manifest",
    "OrphanReport",
    "PartitionNotFound",
    "PartitionRef",
    "PartitionStoreError",
    "Producer",
    "ReleaseRefused",
    "ReleaseReport",
    "RetentionOutcome",
    "RunRef",
    "StoredCopy",
    "S3PartitionStore",
    "StaleCommitError",
    "StoreLayout",
    "Unavailable",
    "UnavailablePartition",
    "Versioned",
    "commit_table",
    "default_transfer_config",
    "file_checksum",
    "partition_id",
    "read_parquet",
    "read_table",
    "write_parquet",
]
