"""Local dev mode: your own DAG folder in the demo's local Airflow, S3 endpoint and Spark Connect server.

    scripts/dev.sh --dags ~/my-pipelines     # starts everything, then stays up until stopped
    source <home>/dev.env                    # in another terminal: airflow and airflow-ft on PATH, aimed here
    Ctrl-C, or SIGTERM to the process        # stops everything; a temporary home is removed

The folder is used in place: a new or edited DAG file is parsed again within seconds, and a file that
does not import is listed in the UI's import errors (it does not stop the start). ``spark_default`` is
the Spark Connect server (so ``@ft_stage`` functions and ``python_callable`` stages run), ``aws_default``
the S3 endpoint, ``[ft_provider] partition_store_url`` a fresh bucket on it, and fault injection
(``ft_faults`` in a run's conf) is allowed. Once everything is up, one line starting ``READY`` says
where (for scripts that start it in the background).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from demo.run_demo import Infrastructure, preflight, say, usable_airflow_home  # noqa: E402


def dags_folder(path: str) -> Path:
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise SystemExit(f"--dags {path}: not a directory; give the folder that holds your DAG files")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dags", required=True, help="your DAG folder, used in place (edits are picked up)")
    parser.add_argument(
        "--airflow-home",
        help="a new or empty directory to use (and keep) as AIRFLOW_HOME "
        "instead of a temporary one; a directory with files in it is refused, never changed",
    )
    args = parser.parse_args(argv)
    folder = dags_folder(args.dags)
    home = usable_airflow_home(args.airflow_home)
    preflight()

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    infra = Infrastructure(home, dags_folder=folder, env_name="dev.env")
    try:
        say(f"Starting the local services for the DAGs in {folder}")
        infra.start_s3()
        infra.start_spark()
        infra.start_airflow()
        airflow = infra.airflow
        say("")
        say(f"Airflow UI:   {airflow.base_url}   login {airflow.username} / {airflow.password}")
        say(f"Failover UI:  {airflow.base_url}/ft-failover/")
        say(f"DAG folder:   {folder} (new and edited files are parsed within seconds)")
        say(f"Partitions:   {infra.store_url}")
        say(f"Other terminal: source {infra.env_file}   (airflow, airflow-ft on PATH, aimed at this Airflow)")
        say(f"Stop: Ctrl-C here, or kill -TERM {os.getpid()}")
        say(f"READY {airflow.base_url} {infra.env_file}")
        while airflow.is_alive():
            time.sleep(1)
        say("an Airflow component exited; its log is under " + str(airflow.log_dir))
        return 1
    except KeyboardInterrupt:
        say("\nStopping ...")
        return 0
    finally:
        infra.stop()


if __name__ == "__main__":
    sys.exit(main())
