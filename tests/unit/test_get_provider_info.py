"""Provider metadata is valid for Airflow, discovered by it, and agrees with the core's defaults."""

import importlib
import importlib.resources
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema

import airflow_ft_provider
from airflow_ft_provider.checkpoints.config import parse_size
from airflow_ft_provider.failover import load_restart_strategy
from airflow_ft_provider.failover.durations import parse_duration
from airflow_ft_provider.failover.restart_config import OPTIONS
from airflow_ft_provider.get_provider_info import CONFIG_SECTION, get_provider_info
from airflow_ft_provider.partitions.cache import DEFAULT_MAX_AGE as DEFAULT_CACHE_MAX_AGE
from airflow_ft_provider.partitions.cache import DEFAULT_MAX_BYTES as DEFAULT_CACHE_MAX_BYTES
from airflow_ft_provider.partitions.manifest import DEFAULT_CHECKSUM, check_algorithm
from airflow_ft_provider.partitions.store import DEFAULT_ORPHAN_GRACE, DEFAULT_RETENTION
from airflow_ft_provider.partitions.sweep import DEFAULT_SWEEP_EVERY, DEFAULT_SWEEP_MAX_RELEASES
from ft_harness.runners import HUNG_AFTER_SECONDS

# What each listed module must define at least one of (by base class).
KINDS = {
    "hooks": "airflow.sdk.BaseHook",
    "operators": "airflow.sdk.BaseOperator",
    "sensors": "airflow.sdk.BaseSensorOperator",
    "triggers": "airflow.triggers.base.BaseTrigger",
}


def _import_object(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


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


def test_every_listed_module_imports_and_defines_its_kind():
    info = get_provider_info()
    integrations = {i["integration-name"] for i in info["integrations"]}
    for kind, base_path in KINDS.items():
        base = _import_object(base_path)
        assert info[kind], f"no {kind} listed"
        for entry in info[kind]:
            assert entry["integration-name"] in integrations, entry
            for module_name in entry["python-modules"]:
                module = importlib.import_module(module_name)
                defined = [
                    name
                    for name, obj in vars(module).items()
                    if inspect.isclass(obj) and issubclass(obj, base) and obj.__module__ == module_name
                ]
                assert defined, f"{module_name} (listed under {kind}) defines no {base.__name__} subclass"
    assert info["sensors"][0]["python-modules"] == ["airflow_ft_provider.sensors.partition"]
    assert info["triggers"][0]["python-modules"] == ["airflow_ft_provider.triggers.partition"]


def test_every_listed_class_exists():
    from airflow.sdk import BaseOperatorLink

    info = get_provider_info()
    assert info["extra-links"] == [
        "airflow_ft_provider.operators.spark_stage.RegionLink",
        "airflow_ft_provider.operators.spark_stage.PartitionsLink",
    ]
    for class_name in info["extra-links"]:
        assert issubclass(_import_object(class_name), BaseOperatorLink)
    for entry in info.get("connection-types", []):
        _import_object(entry["hook-class-name"])
    # The store uses the Amazon provider's 'aws' type; registering it here would take the type over.
    assert "aws" not in {entry["connection-type"] for entry in info.get("connection-types", [])}


def test_config_declares_every_partition_store_key_the_hook_reads():
    import airflow_ft_provider.hooks.partition_store as hook_module

    source = Path(hook_module.__file__).read_text()
    read = set(re.findall(r'(?:_config|_seconds|_flag)\(\s*"([a-z_]+)"', source))
    options = get_provider_info()["config"][CONFIG_SECTION]["options"]
    assert read == {
        "partition_store_url",
        "partition_store_cache_dir",
        "partition_store_checksum",
        "partition_store_retention",
        "partition_store_orphan_grace",
        "partition_store_allow_unconditional_writes",
        "partition_store_cache_max_size",
        "partition_store_cache_max_age",
        "partition_store_sweep_interval",
        "partition_store_sweep_max_runs",
    }
    assert read <= set(options)
    # The declared defaults are the ones the hook falls back to.
    assert options["partition_store_url"]["default"] is None
    assert options["partition_store_cache_dir"]["default"] is None
    assert parse_size(options["partition_store_cache_max_size"]["default"]) == DEFAULT_CACHE_MAX_BYTES
    assert parse_duration(options["partition_store_cache_max_age"]["default"]) == DEFAULT_CACHE_MAX_AGE
    assert check_algorithm(options["partition_store_checksum"]["default"]) == DEFAULT_CHECKSUM
    assert parse_duration(options["partition_store_retention"]["default"]) == DEFAULT_RETENTION
    assert parse_duration(options["partition_store_orphan_grace"]["default"]) == DEFAULT_ORPHAN_GRACE
    assert parse_duration(options["partition_store_sweep_interval"]["default"]) == DEFAULT_SWEEP_EVERY
    assert int(options["partition_store_sweep_max_runs"]["default"]) == DEFAULT_SWEEP_MAX_RELEASES
    parse_duration(options["partition_store_retention"]["example"])
    parse_duration(options["partition_store_orphan_grace"]["example"])


def test_airflow_lists_the_provider():
    listing = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "list", "--output", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=HUNG_AFTER_SECONDS,
    )
    names = [row["package_name"] for row in json.loads(listing.stdout)]
    assert "airflow-ft-provider" in names


def test_airflow_registers_the_trigger_extra_link_and_config_defaults(tmp_path):
    probe = (
        "import json; from airflow.providers_manager import ProvidersManager; "
        "from airflow.sdk import conf; pm = ProvidersManager(); "
        "print(json.dumps({"
        "'triggers': [t.trigger_class_name for t in pm.trigger if t.package_name == 'airflow-ft-provider'], "
        "'links': [c for c in sorted(pm.extra_links_class_names) if c.startswith('airflow_ft_provider.')], "
        "'checksum': conf.get('ft_provider', 'partition_store_checksum'), "
        "'retention': conf.get('ft_provider', 'partition_store_retention'), "
        "'url': conf.get('ft_provider', 'partition_store_url', fallback='unset')}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__FT_PROVIDER__")}
    env["AIRFLOW_HOME"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=HUNG_AFTER_SECONDS
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    options = get_provider_info()["config"][CONFIG_SECTION]["options"]
    assert seen == {
        "triggers": ["airflow_ft_provider.triggers.partition"],
        "links": [
            "airflow_ft_provider.operators.spark_stage.PartitionsLink",
            "airflow_ft_provider.operators.spark_stage.RegionLink",
        ],
        "checksum": DEFAULT_CHECKSUM,
        "retention": options["partition_store_retention"]["default"],
        "url": "unset",
    }


def test_failover_core_imports_nothing_from_airflow():
    probe = (
        "import sys, airflow_ft_provider.failover as f; "
        "bad = sorted(m for m in sys.modules if m == 'airflow' or "
        "m.startswith(('airflow.', 'pyspark', 'boto'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_config_declares_fault_injection_off_by_default():
    from airflow_ft_provider.faults import ALLOW_KEY

    option = get_provider_info()["config"][CONFIG_SECTION]["options"][ALLOW_KEY]
    assert (ALLOW_KEY, option["type"], option["default"]) == ("allow_fault_injection", "boolean", "False")


def test_config_declares_unconditional_writes_unsafe_and_off_by_default():
    from airflow_ft_provider.partitions.conditional import ALLOW_UNCONDITIONAL_KEY

    option = get_provider_info()["config"][CONFIG_SECTION]["options"][ALLOW_UNCONDITIONAL_KEY]
    assert (ALLOW_UNCONDITIONAL_KEY, option["type"], option["default"]) == (
        "partition_store_allow_unconditional_writes",
        "boolean",
        "False",
    )
    assert option["description"].startswith("UNSAFE.")


def test_restart_option_descriptions_state_the_ranges_the_loader_enforces():
    options = get_provider_info()["config"][CONFIG_SECTION]["options"]
    for key, option in OPTIONS.items():
        assert options[key]["description"].endswith(f"Must be {option.requirement}."), key
    # Flink's checkArgument(backoffMultiplier > 1, ...), not "≥ 1"
    assert options["restart-strategy.exponential-delay.backoff-multiplier"]["description"].endswith(
        "Must be > 1."
    )
    assert "restart-strategy, is still read" in options["restart-strategy.type"]["description"]


def test_the_provider_is_found_once_with_the_repository_on_the_python_path():
    """The live Airflow and dev.env put the repository on PYTHONPATH; a build's egg-info left there would
    make Airflow find the distribution twice and print "Plugin 'ft_failover' already registered" on the
    stdout of every airflow command (breaking ``airflow ... -o json``)."""
    repo = Path(__file__).resolve().parents[2]
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            # Airflow's own lookup: every distribution on sys.path, not deduplicated as importlib's is
            "from airflow._shared.module_loading import entry_points_with_dist as found; "
            "print(sum(1 for e, _ in found('airflow.plugins') if e.name == 'ft_failover'))",
        ],
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "1", list(repo.glob("*.egg-info"))


def test_provider_yaml_is_the_metadata_airflow_reads():
    """``provider.yaml`` (the form Airflow's providers keep) is get_provider_info() rendered, not a copy
    kept by hand: regenerate it with ``python -m airflow_ft_provider.get_provider_info``."""
    import yaml

    path = Path(airflow_ft_provider.__file__).parent / "provider.yaml"
    assert yaml.safe_load(path.read_text()) == get_provider_info()
