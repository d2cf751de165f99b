"""Provider metadata is valid for Airflow, discovered by it, and agrees with the core's defaults."""

import importlib.resources
import json
import subprocess
import sys

import jsonschema

from airflow_ft_provider.failover import load_restart_strategy
from airflow_ft_provider.failover.restart_config import OPTIONS
from airflow_ft_provider.get_provider_info import CONFIG_SECTION, get_provider_info


def test_provider_info_matches_airflows_schema():
    schema = json.loads((importlib.resources.files("airflow") / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "airflow-ft-provider"


def test_config_defaults_build_the_documented_strategies():
    options = get_provider_info()["config"][CONFIG_SECTION]["options"]
    assert options["jobmanager.execution.failover-strategy"]["default"] == "region"
    assert options["restart-strategy.type"]["default"] is None
    # Every restart-strategy option's default, fed back into the loader, gives Flink's defaults.
    defaults = {key: spec["default"] for key, spec in options.items() if key in OPTIONS}
    assert set(defaults) == set(OPTIONS)
    for kind in ("fixed-delay", "failure-rate", "exponential-delay"):
        load_restart_strategy({**defaults, "restart-strategy.type": kind})


def test_airflow_lists_the_provider():
    listing = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "list", "--output", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    names = [row["package_name"] for row in json.loads(listing.stdout)]
    assert "airflow-ft-provider" in names


def test_failover_core_imports_nothing_from_airflow():
    probe = (
        "import sys, airflow_ft_provider.failover as f; "
        "bad = sorted(m for m in sys.modules if m == 'airflow' or m.startswith(('airflow.', 'pyspark', 'boto'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
