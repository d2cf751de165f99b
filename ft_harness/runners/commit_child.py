"""A partition commit in a child process that can stop at a named step and wait to be killed.

``python -m ft_harness.runners.commit_child URL PIPELINE RUN_ID RESULT MAP_INDEX TRY SOURCE_DIR``
with the endpoint in ``FT_CHILD_S3_*`` (see S3Endpoint.env) and ``FT_TEST_PAUSE_AT=<step>[:<n>]``
(``file_uploaded:3`` = after the third file finished uploading). On reaching it the child prints
``PAUSED <step>`` and sleeps until it is killed, which makes the crash point deterministic.
Prints ``DONE`` when the commit finished without pausing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any


def child_s3_client() -> Any:
    """A boto3 client for the endpoint the test passed in ``FT_CHILD_S3_*`` (S3Endpoint.env)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=os.environ["FT_CHILD_S3_ENDPOINT"],
        region_name=os.environ["FT_CHILD_S3_REGION"],
        aws_access_key_id=os.environ["FT_CHILD_S3_ACCESS_KEY"],
        aws_secret_access_key=os.environ["FT_CHILD_S3_SECRET_KEY"],
        config=Config(retries={"total_max_attempts": 2}),
    )


def main(argv: list[str]) -> None:
    from airflow_ft_provider.partitions import PartitionRef, Producer, S3PartitionStore

    url, pipeline, run_id, result, map_index, try_number, source = argv
    pause_at = os.environ.get("FT_TEST_PAUSE_AT", "")
    step_name, _, count = pause_at.partition(":")

    def on_step(step: str, info: Mapping[str, Any]) -> None:
        if step != step_name:
            return
        if count and info.get("uploaded") != int(count):
            return
        print(f"PAUSED {pause_at}", flush=True)
        while True:
            time.sleep(3600)

    client = child_s3_client()
    store = S3PartitionStore(client, url, on_step=on_step)
    ref = PartitionRef(pipeline, run_id, result, int(map_index))
    store.commit(
        ref,
        source,
        producer=Producer("producer", int(map_index), int(try_number)),
        format="binary",
        compression="none",
    )
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
