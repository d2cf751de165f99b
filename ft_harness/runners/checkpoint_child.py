"""A checkpoint upload in a child process that stops at a step and waits to be killed.

``python -m ft_harness.runners.checkpoint_child URL PIPELINE RUN_ID TASK TASK_DIR CHECKPOINT_ID`` with the
endpoint in ``FT_CHILD_S3_*`` and ``FT_TEST_PAUSE_AT=objects_uploaded``: the child prints ``PAUSED``
once every object of the checkpoint is in the store and its ``_metadata`` is not, and sleeps there
until it is killed (a worker lost mid-upload, at an exact point rather than a matter of timing).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    from airflow_ft_provider.checkpoints.store_copy import Fence, StoreCheckpoints
    from airflow_ft_provider.partitions import RunRef, S3PartitionStore
    from ft_harness.runners.commit_child import child_s3_client

    url, pipeline, run_id, task, task_dir, checkpoint_id = argv
    pause_at = os.environ.get("FT_TEST_PAUSE_AT", "")

    def on_step(step: str, _: int) -> None:
        if step == pause_at:
            print(f"PAUSED {step}", flush=True)
            while True:
                time.sleep(3600)

    store = S3PartitionStore(child_s3_client(), url)
    copy = StoreCheckpoints(store, RunRef(pipeline, run_id), task, on_step=on_step)
    copy.take(
        Path(task_dir), int(checkpoint_id), Fence({"raw": "a1"}, 100, 1), processed_bytes=0, compress=False
    )
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
