"""How a checkpointed stage's streaming output is written: the output modes it accepts, the state store
it runs with, and the ``foreachBatch`` function of a complete-mode output (each micro-batch holds the
whole result: it is written into a directory of its own, and the older ones are removed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

OUTPUT_MODES = ("append", "complete")
STATE_STORE_CONF = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


def latest_batch_writer(
    location: str, codec: str, fail_in: int | None, injected: str
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function of a complete-mode output under ``location``; it fails (with the
    text ``injected``) after writing batch ``fail_in``, before Spark commits it (fault injection)."""

    def write_batch(batch: DataFrame, batch_id: int) -> None:  # runs in the Spark server (Connect)
        # Pickled by value and run where Airflow is not installed: the standard library only.
        import os
        import shutil

        batch.write.mode("overwrite").option("compression", codec).parquet(f"{location}/b{batch_id:010d}")
        root = location.removeprefix("file://")  # this batch holds the whole result: drop the older
        for entry in os.listdir(root):
            if entry.startswith("b") and entry[1:].isdigit() and int(entry[1:]) < batch_id:
                shutil.rmtree(os.path.join(root, entry), ignore_errors=True)
        if fail_in is not None and batch_id == fail_in:  # its output is written, its commit is not
            raise RuntimeError(injected)

    return write_batch
