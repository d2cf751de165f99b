"""What the API server trusts about a run before it reads its store or restarts anything.

Two inputs can be written by people other than the DAG's author: the ``ft_store`` XCom (through the
public REST API, by anyone allowed to edit the DAG's XComs) and the objects in S3 (by anything holding
the store's credentials). Neither may choose where the API server reads and writes, or what it clears.

The API server trusts what DAG files decide and its own settings, and it never imports DAG files:

* the store and its connection are the ones the run's **serialized DAG** names (the metadata DB,
  written by the DAG processor): a pipeline's blocking outputs are Assets
  ``s3://<bucket>/<prefix><dag_id>/<result>`` of group ``ft-partitions`` whose ``extra`` names the
  pipeline's ``aws_conn_id``; a pipeline without any uses the server's ``[ft_provider]
  partition_store_url`` and ``partition_store_conn_id``;
* the XCom must name that store and that connection; it is compared, never used: no request is signed
  with a connection the DAG's configuration does not name, and a refusal reads the same whether the
  connection the XCom names exists or not;
* the run's stored pipeline description (read with the DAG's connection) must name them too;
* the description must be of this DAG, its stages tasks of the run's serialized DAG, a stage's
  parallelism 1 for an unmapped task and at most ``[core] max_map_length`` for a mapped one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from airflow_ft_provider.hooks.task_instances import TaskInstanceApi
from airflow_ft_provider.model.description import PipelineDescription
from airflow_ft_provider.partitions import S3PartitionStore
from airflow_ft_provider.partitions.naming import StoreLayout
from airflow_ft_provider.recovery.run_recovery import RunNotReady, RunRecovery

PARTITION_ASSET_GROUP = "ft-partitions"
ASSET_CONN_KEY = "aws_conn_id"  # in a partition Asset's extra: the connection its store is reached through
DEFAULT_AWS_CONN_ID = "aws_default"
_CONN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,250}\Z")


class UntrustedRun(ValueError):
    """The run's stored pointers disagree with its DAG's configuration: nothing was read or changed."""


class ServedTask(Protocol):
    @property
    def task_id(self) -> str: ...


class ServedDag(Protocol):
    """A DAG as the API server holds it (serialized): its id and tasks are all that is read here."""

    @property
    def dag_id(self) -> str: ...

    @property
    def tasks(self) -> Sequence[ServedTask]: ...


@dataclass(frozen=True)
class StorePointer:
    """A partition store and the ``aws`` connection it is reached through."""

    url: str
    aws_conn_id: str


def _asset_fields(outlet: object) -> tuple[str | None, str | None, object]:
    """(uri, group, extra) of an outlet. Deserialized operators hold Asset objects; mapped ones keep the
    serialized dicts of partial_kwargs."""
    if isinstance(outlet, Mapping):
        fields = outlet.get("__var", outlet)
        return fields.get("uri"), fields.get("group"), fields.get("extra")
    return getattr(outlet, "uri", None), getattr(outlet, "group", None), getattr(outlet, "extra", None)


def configured_store(dag: ServedDag, *, default: StorePointer | None) -> StorePointer | None:
    """The store and connection the serialized DAG's partition Assets name; ``default`` (the API server's
    own settings) if it declares none. An asset serialized without a connection (an older release of
    this provider) names the default connection until the DAG processor serializes the DAG again."""
    default_conn = default.aws_conn_id if default else DEFAULT_AWS_CONN_ID
    found = set()
    for task in dag.tasks:
        for outlet in getattr(task, "outlets", None) or ():
            uri, group, extra = _asset_fields(outlet)
            if group != PARTITION_ASSET_GROUP or not isinstance(uri, str):
                continue
            head = uri.rpartition("/")[0]
            if not head.endswith(f"/{dag.dag_id}"):
                raise UntrustedRun(
                    f"partition asset {uri!r} of DAG {dag.dag_id!r} is not under the DAG's prefix"
                )
            conn_id = extra.get(ASSET_CONN_KEY) if isinstance(extra, Mapping) else None
            found.add(StorePointer(_normalized(head[: -len(dag.dag_id)]), _conn_id(conn_id or default_conn)))
    if len(found) > 1:
        raise UntrustedRun(
            f"the partition assets of DAG {dag.dag_id!r} name several stores or connections: "
            f"{sorted((p.url, p.aws_conn_id) for p in found)}"
        )
    if found:
        return found.pop()
    return StorePointer(_normalized(default.url), _conn_id(default.aws_conn_id)) if default else None


def _conn_id(value: object) -> str:
    if not isinstance(value, str) or not _CONN_ID.match(value):
        raise UntrustedRun(f"the partition assets name an invalid connection id {str(value)[:100]!r}")
    return value


def _normalized(url: str) -> str:
    return StoreLayout.from_url(url).url


def check_pointer(pointer: object, *, dag_id: str, run_id: str, trusted: StorePointer | None) -> StorePointer:
    """The store and connection the DAG's configuration names, once the ``ft_store`` XCom (which says a
    stage started) is found to name exactly them. The XCom's values are only compared, never used."""
    if not isinstance(pointer, Mapping) or not isinstance(pointer.get("url"), str):
        raise RunNotReady(f"no stage of run {run_id!r} of DAG {dag_id!r} has started yet: nothing to show")
    if trusted is None:
        raise UntrustedRun(
            f"DAG {dag_id!r} names no partition store: its serialized DAG has no partition assets and "
            "[ft_provider] partition_store_url is not set on the API server; set it there"
        )
    conn_id = pointer.get("aws_conn_id") or DEFAULT_AWS_CONN_ID
    try:
        url = _normalized(pointer["url"])
    except ValueError:
        url = None
    if url != trusted.url or conn_id != trusted.aws_conn_id:
        raise UntrustedRun(
            f"the ft_store XCom of run {run_id!r} names store {str(pointer['url'])[:200]!r} with connection "
            f"{str(conn_id)[:100]!r}, but DAG {dag_id!r} is configured with store {trusted.url!r} and "
            f"connection {trusted.aws_conn_id!r}; the XCom is writable through the REST API, so the API "
            "server does not use it: delete the XCom or re-run a stage"
        )
    return trusted


def check_description(
    description: PipelineDescription, *, dag: ServedDag, pointer: StorePointer, max_parallelism: int
) -> PipelineDescription:
    """The run's stored description, accepted only if it belongs to this DAG and fits it."""
    dag_id = dag.dag_id
    if description.dag_id != dag_id:
        raise UntrustedRun(
            f"the stored pipeline description of this run is of DAG {description.dag_id!r}, not {dag_id!r}; "
            "refusing to act on it"
        )
    if description.aws_conn_id != pointer.aws_conn_id:
        raise UntrustedRun(
            f"DAG {dag_id!r} is configured with connection {pointer.aws_conn_id!r}, the run's stored "
            f"pipeline description names {description.aws_conn_id!r}; refusing to act on it"
        )
    if description.store and _normalized(description.store) != pointer.url:
        raise UntrustedRun(
            f"the stored pipeline description names store {description.store!r}, "
            f"DAG {dag_id!r} {pointer.url!r}"
        )
    tasks = {task.task_id: task for task in dag.tasks}
    for stage in description.stages.values():
        task = tasks.get(stage.task_id)
        if task is None:
            raise UntrustedRun(
                f"the stored pipeline description names stage {stage.task_id!r}, which DAG "
                f"{dag_id!r} does not have"
            )
        mapped = bool(getattr(task, "is_mapped", False))
        limit = max_parallelism if mapped else 1
        if description.map_counts.get(stage.task_id, 0) > limit:
            raise UntrustedRun(
                f"the stored pipeline description records {description.map_counts[stage.task_id]} map "
                f"indexes of stage {stage.task_id!r}; DAG {dag_id!r} allows at most {limit} "
                "([core] max_map_length)"
            )
        if not 1 <= stage.parallelism <= limit:
            raise UntrustedRun(
                f"the stored pipeline description gives stage {stage.task_id!r} "
                f"parallelism {stage.parallelism}; "
                f"a{' mapped' if mapped else 'n unmapped'} task of DAG {dag_id!r} has 1"
                f"{f' to {limit} ([core] max_map_length)' if mapped else ''}"
            )
    return description


def trusted_run(
    *,
    dag: ServedDag,
    run_id: str,
    pointer: object,
    default: StorePointer | None,
    max_parallelism: int,
    store_factory: Callable[[str, str], S3PartitionStore],
    api: TaskInstanceApi | None = None,
) -> RunRecovery:
    """The run's recovery, from the store the DAG's configuration names, its stored pipeline checked.

    ``store_factory(aws_conn_id, url)`` builds the store; ``api`` is what a restart clears through.
    :class:`UntrustedRun`, :class:`RunNotReady` or a ``ValueError`` (an unusable run id, a damaged
    description) say why not.
    """
    checked = check_pointer(
        pointer, dag_id=dag.dag_id, run_id=run_id, trusted=configured_store(dag, default=default)
    )
    store = store_factory(checked.aws_conn_id, checked.url)
    try:
        recovery = RunRecovery.for_reader(store, dag.dag_id, run_id, api=api)
    except RunNotReady:
        raise RunNotReady("the run has no stored pipeline description yet") from None
    check_description(recovery.pipeline, dag=dag, pointer=checked, max_parallelism=max_parallelism)
    return recovery
