"""The reference distributed deployment, on one machine: what the cluster scenarios run on, and what
``scripts/cluster.sh`` starts for people to try and copy.

* **PostgreSQL** (:mod:`ft_harness.services.postgres`): the metadata database, and Celery's result backend;
* **Redis** (:mod:`ft_harness.services.redis`): the Celery broker;
* **Airflow 3.3 with CeleryExecutor** (:mod:`ft_harness.airflow.celery_airflow`): API server, two schedulers
  (HA mode), DAG processor, triggerer and two Celery workers, each with its own address, temporary
  directory and task logs;
* **a Spark standalone cluster** (:class:`ft_harness.services.spark_cluster.SparkStandalone`): a master
  and two workers, and a **Spark Connect server** that is one application of it (``spark_default``: stages
  run as its sessions); ``spark_submit`` is the master itself, for stages on spark-submit (client
  mode: the driver on the Airflow worker, the executors on the Spark host). **The Spark side is a host
  of its own** (:class:`ft_harness.services.spark_host.SparkHost`: a mount namespace with a private ``/tmp``,
  the deployment's folder and the checkout hidden), sharing only the network with the Airflow side,
  so ``[ft_provider] data_path = executors``, as on any cluster: every stage runs there, checkpointed
  ones included (their Spark checkpoints stay on the Spark host);
* **an S3 endpoint** (the moto server of :mod:`ft_harness.services.s3_server`, or the one given) with a bucket
  for the partition store;
* a pausable proxy in front of the API server for the ``airflow_api`` connection (the provider's REST
  client), so that a scenario can take the REST API away from the workers (``rest_api.outage(60)``)
  while Airflow's own components keep theirs.

Everything started is stopped by :meth:`ReferenceDeployment.stop` (or the ``with`` block).
"""

from __future__ import annotations

import json
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ft_harness.airflow.celery_airflow import CeleryAirflow
from ft_harness.airflow.live_airflow import EXAMPLE_DAGS_DIR
from ft_harness.airflow.live_environment import pipeline_environment
from ft_harness.services.postgres import PostgresServer
from ft_harness.services.redis import RedisServer
from ft_harness.services.s3_server import S3Endpoint, start_moto_server, stop_moto_server
from ft_harness.services.spark_cluster import SparkStandalone, StandaloneCluster
from ft_harness.services.spark_connect import SparkConnectServer
from ft_harness.services.spark_host import SparkHost
from ft_harness.services.tcp_proxy import PausableProxy

# Spark defaults of every spark-submit of the deployment (SPARK_CONF_DIR): an application takes one
# core of the cluster, so that the Connect server and the submitted stages share it instead of the
# first application holding every core (a standalone master's default) and the others waiting.
SPARK_DEFAULTS = {"spark.cores.max": "1", "spark.executor.memory": "512m", "spark.ui.enabled": "false"}
CONNECT_CONF = {"spark.cores.max": "2", "spark.executor.memory": "768m"}


class ReferenceDeployment:
    """``with ReferenceDeployment(dags=[...]) as d: d.airflow.client.trigger_dag_run(...)``.

    :param s3: an S3 endpoint to use (default: a moto server of its own).
    :param env: extra environment for every Airflow component.
    :param connect_conf: Spark settings of the Spark Connect server beside ``CONNECT_CONF``.
    """

    def __init__(
        self,
        dags: Iterable[str | Path] = (EXAMPLE_DAGS_DIR,),
        *,
        folder: Path | None = None,
        s3: S3Endpoint | None = None,
        airflow_workers: int = 2,
        spark_workers: int = 2,
        env: Mapping[str, str] | None = None,
        connect_conf: Mapping[str, str] | None = None,
    ) -> None:
        self.dags = list(dags)
        self.connect_conf = {**CONNECT_CONF, **(connect_conf or {})}
        self.folder = Path(folder or tempfile.mkdtemp(prefix="ft-deployment-"))
        self.airflow_workers = airflow_workers
        self.spark_workers = spark_workers
        self.extra_env = dict(env or {})
        self._given_s3 = s3
        self.s3: S3Endpoint | None = s3
        self.store_url = ""
        self.postgres: PostgresServer | None = None
        self.redis: RedisServer | None = None
        self.spark_host: SparkHost | None = None
        self.standalone: SparkStandalone | None = None
        self.spark: StandaloneCluster | None = None
        self.connect: SparkConnectServer | None = None
        self.rest_api: PausableProxy | None = None
        self.airflow: CeleryAirflow | None = None

    def start(self) -> ReferenceDeployment:
        t0 = time.monotonic()
        try:
            self.postgres = PostgresServer().start()
            self.redis = RedisServer().start()
            if self.s3 is None:
                self.s3 = start_moto_server()
            bucket = f"ft-deployment-{secrets.token_hex(4)}"
            self.s3.client().create_bucket(Bucket=bucket)
            self.store_url = f"s3://{bucket}/pipelines/"
            # The Spark side shares no disk with the Airflow side: not its folder, not /tmp
            self.spark_host = SparkHost(hidden=[self.folder]).start()
            self.standalone = SparkStandalone(
                self.folder / "spark",
                workers=self.spark_workers,
                cores=2,
                memory="2g",
                host=self.spark_host,
                recovery=True,  # a master started again takes back its workers and applications
            )
            self.spark = self.standalone.start()
            self.connect = SparkConnectServer(
                master=self.spark.url,
                log_dir=self.folder / "spark",
                conf=self.connect_conf,
                host=self.spark_host,
            )
            self.connect.launch()
            self.airflow = CeleryAirflow(
                self.dags,
                home=self.folder / "airflow",
                broker_url=self.redis.url(0),
                database_url=self.postgres.create_database("airflow"),
                workers=self.airflow_workers,
                schedulers=2,  # Airflow's HA mode: a scenario kills one during a restart's backoff
            )
            self.rest_api = PausableProxy("127.0.0.1", self.airflow.port)
            self.airflow.api_conn_port = self.rest_api.port
            self.airflow.extra_env = {**self.environment(), **self.extra_env}
            self.airflow.start()
            self.connect.wait_until_ready()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - t0
        return self

    def environment(self) -> dict[str, str]:
        """Connections and settings of the pipeline DAGs (the same in every Airflow component)."""
        assert self.s3 is not None and self.spark is not None
        conf_dir = self.folder / "spark-conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        (conf_dir / "spark-defaults.conf").write_text(
            "".join(f"{k} {v}\n" for k, v in SPARK_DEFAULTS.items())
        )
        env = pipeline_environment(self.s3, self.store_url, self.connect)
        env["AIRFLOW_CONN_SPARK_SUBMIT"] = json.dumps({"conn_type": "spark", "host": self.spark.url})
        env["SPARK_CONF_DIR"] = str(conf_dir)
        env["AIRFLOW__FT_PROVIDER__DATA_PATH"] = "executors"  # Spark is on another host
        return env

    def describe(self) -> str:
        assert self.airflow is not None and self.spark is not None and self.connect is not None
        assert self.postgres is not None and self.redis is not None and self.s3 is not None
        workers = ", ".join(f"{w.celery_hostname} (logs {w.folder / 'logs'})" for w in self.airflow.workers)
        return "\n".join(
            [
                f"Airflow UI/API   {self.airflow.base_url}  (admin/admin)",
                f"Schedulers       {', '.join(self.airflow.schedulers)} (HA)",
                f"Celery workers   {workers}",
                f"PostgreSQL       {self.postgres.url('airflow')}",
                f"Redis broker     {self.redis.url(0)}",
                f"Spark master     {self.spark.url}  (web UI {self.spark.master_web_ui})",
                f"Spark Connect    {self.connect.url}  (spark_default, on the Spark host)",
                f"S3 endpoint      {self.s3.url}  store {self.store_url}",
                f"Component logs   {self.airflow.log_dir}",
            ]
        )

    def stop(self) -> None:
        for step in (
            lambda: self.airflow and self.airflow.stop(),
            lambda: self.rest_api and self.rest_api.close(),
            lambda: self.connect and self.connect.stop(),
            lambda: self.standalone and self.standalone.stop(),
            lambda: self.spark_host and self.spark_host.stop(),
            lambda: self.redis and self.redis.stop(),
            lambda: self.postgres and self.postgres.stop(),
            lambda: self._given_s3 is None and self.s3 is not None and stop_moto_server(self.s3),
        ):
            try:
                step()
            except Exception as err:  # noqa: BLE001 - stop the rest whatever one of them does
                print(f"(stopping the deployment: {err!r})", file=sys.stderr)

    def __enter__(self) -> ReferenceDeployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str]) -> None:
    """``python -m ft_harness.airflow.deployment [DAG folder ...]``: start, print where everything is, run
    until Ctrl-C, stop everything."""
    dags = [Path(a) for a in argv] or [EXAMPLE_DAGS_DIR]
    print(
        ">> starting PostgreSQL, Redis, S3, Spark (master + 2 workers + Connect) and Airflow (Celery, "
        "2 workers)",
        flush=True,
    )
    with ReferenceDeployment(dags) as deployment:
        print(
            f">> up in {deployment.started_in:.0f} s\n{deployment.describe()}\n>> Ctrl-C stops it all",
            flush=True,
        )
        stop: list[Any] = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        try:
            while not stop:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    print(">> stopped", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
