"""botocore's S3 data files, parsed once per process and shared by every S3 client it creates.

A new boto3 session has its own data loader, so its first S3 client decompresses and parses the
endpoint list, S3's service model and its endpoint rule set again (~0.35 CPU-s). Every stage try is a
new process making such a client. Sessions made by :func:`boto3_session` share one loader, and
:func:`warm_s3_models` fills it before a worker forks its task processes, so their clients start
from parsed data. The loader holds only parsed JSON: no connection, thread or credential crosses the
fork.

The sessions also parse S3's timestamps with ``datetime.fromisoformat`` instead of botocore's default
(dateutil): a listing of 2,000 objects spent 0.4 s of its 0.8 s parsing their ``LastModified``
(bench/bench_failover_page.py lists a run of 1,000 partitions on every page load).
"""

from __future__ import annotations

import datetime
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import boto3.session
    import botocore.loaders
    import botocore.session

_LOADER: botocore.loaders.Loader | None = None
_LOCK = threading.Lock()


def boto3_session(**settings: str | None) -> boto3.session.Session:
    """A new boto3 session (``settings``: boto3's Session arguments) whose botocore session uses the
    process's shared data loader."""
    import boto3.session
    import botocore.loaders
    import botocore.session

    global _LOADER
    core = botocore.session.Session()
    with _LOCK:
        if _LOADER is None:
            _LOADER = botocore.loaders.create_loader(core.get_config_variable("data_path"))
        loader = _LOADER
    core.register_component("data_loader", loader)
    _fast_timestamps(core)
    session = boto3.session.Session(botocore_session=core, **settings)
    with _LOCK:  # boto3 adds its own data folder to the loader each time it wraps a session: keep one
        loader.search_paths[:] = list(dict.fromkeys(loader.search_paths))
    return session


def share_loader(session: boto3.session.Session) -> boto3.session.Session:
    """``session`` (a boto3 session made elsewhere, e.g. by the Amazon provider's ``AwsBaseHook``), its
    botocore session now on the process's shared data loader; returned for chaining."""
    core = session._session
    own = core.get_component("data_loader")
    global _LOADER
    with _LOCK:
        if _LOADER is None:
            _LOADER = own
        else:  # keep the search paths boto3 gave this session's loader (its own data folder)
            _LOADER.search_paths[:] = list(dict.fromkeys([*_LOADER.search_paths, *own.search_paths]))
        loader = _LOADER
    core.register_component("data_loader", loader)
    _fast_timestamps(core)
    return session


def _fast_timestamps(core: botocore.session.Session) -> None:
    """Responses of ``core``'s clients made from now on parse timestamps the fast way."""
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)


def parse_timestamp(value: object) -> datetime.datetime:
    """An S3 timestamp (ISO 8601, as S3's XML gives it; epoch seconds elsewhere), timezone-aware;
    what this parser does not know goes to botocore's."""
    if isinstance(value, str) and value[:4].isdigit():
        try:
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    from botocore.utils import parse_timestamp as botocore_parse

    return botocore_parse(value)


def warm_s3_models() -> None:
    """Import boto3's S3 transfer code and parse what an S3 client and its paginators need.

    Makes a client with placeholder credentials and no endpoint call, then drops it.
    """
    import boto3.s3.transfer  # noqa: F401  (the commit and fetch paths use it)

    session = boto3_session(
        aws_access_key_id="preload", aws_secret_access_key="preload", region_name="us-east-1"
    )
    client = session.client("s3")
    client.can_paginate("list_objects_v2")  # loads the paginator model
    client.close()
