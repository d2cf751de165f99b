"""botocore's S3 data files, parsed once per process and shared by every S3 client it creates.

A new boto3 session has its own data loader, so its first S3 client decompresses and parses the
endpoint list, S3's service model and its endpoint rule set again (~0.35 CPU-s). Every stage try is a
new process making such a client. Sessions made by :func:`botocore_session` share one loader, and
:func:`warm_s3_models` fills it before a worker forks its task processes, so their clients start
from parsed data. The loader holds only parsed JSON: no connection, thread or credential crosses the
fork.
"""

from __future__ import annotations

import threading
from typing import Any

_LOADER: Any = None
_LOCK = threading.Lock()


def botocore_session() -> Any:
    """A new botocore session whose data loader is the process's shared one."""
    import botocore.loaders
    import botocore.session

    global _LOADER
    session = botocore.session.Session()
    with _LOCK:
        if _LOADER is None:
            _LOADER = botocore.loaders.create_loader(session.get_config_variable("data_path"))
        loader = _LOADER
    session.register_component("data_loader", loader)
    return session


def forget_repeated_search_paths() -> None:
    """boto3 adds its own data folder to a session's loader each time it wraps one: keep one copy."""
    with _LOCK:
        if _LOADER is not None:
            paths = _LOADER.search_paths
            paths[:] = list(dict.fromkeys(paths))


def warm_s3_models() -> None:
    """Import boto3's S3 transfer code and parse what an S3 client and its paginators need.

    Makes a client with placeholder credentials and no endpoint call, then drops it.
    """
    import boto3.s3.transfer  # noqa: F401  (the commit and fetch paths use it)
    import boto3.session

    session = boto3.session.Session(
        botocore_session=botocore_session(),
        aws_access_key_id="preload",
        aws_secret_access_key="preload",
        region_name="us-east-1",
    )
    forget_repeated_search_paths()
    client = session.client("s3")
    client.can_paginate("list_objects_v2")  # loads the paginator model
    client.close()
