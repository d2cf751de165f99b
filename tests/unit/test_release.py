"""The release: ``python -m build`` makes a wheel and an sdist that pass ``twine check``, and the wheel,
installed into a fresh virtual environment with no clone on ``sys.path``, is a provider Airflow lists,
with its UI plugin, and the example DAGs parse there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from airflow_ft_provider import __version__

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.airflow  # Airflow's own CLI, in the fresh environment

DAG_BAG = """
import json, os, sys
from airflow.dag_processing.dagbag import DagBag
sys.path.insert(0, os.environ["AIRFLOW__CORE__DAGS_FOLDER"])  # as the DAG processor has it: helpers import
bag = DagBag()  # the DAG folder of [core] dags_folder
print(json.dumps({"dags": sorted(bag.dag_ids), "errors": bag.import_errors}))
"""


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, (
        f"{' '.join(map(str, argv))}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and sdist, built from a copy of what ships (a build writes egg-info beside its source)."""
    tmp = tmp_path_factory.mktemp("release")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "airflow_ft_provider",
        source / "airflow_ft_provider",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(source)])
    return tmp / "dist"


def test_the_wheel_and_the_sdist_pass_twine_check(dist: Path) -> None:
    built = sorted(p.name for p in dist.iterdir())
    assert built == [
        f"airflow_ft_provider-{__version__}-py3-none-any.whl",
        f"airflow_ft_provider-{__version__}.tar.gz",
    ]
    checked = run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir()))])
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    with zipfile.ZipFile(next(dist.glob("*.whl"))) as wheel:  # the metadata in the providers' own form
        assert "airflow_ft_provider/provider.yaml" in wheel.namelist()


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed. Its dependencies are this environment's,
    seen through a folder of links to all of them but this package: the clone's editable install, its
    metadata and its entry points stay out."""
    tmp = tmp_path_factory.mktemp("fresh-venv")
    dependencies = tmp / "dependencies"
    dependencies.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("airflow_ft_provider", "__editable__")):
            (dependencies / entry.name).symlink_to(entry)
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(
        run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    )
    (site / "ft-test-dependencies.pth").write_text(f"{dependencies}\n")
    wheel = next(dist.glob("*.whl"))
    uv = Path(sys.executable).with_name("uv")
    run([str(uv), "pip", "install", "--quiet", "--no-deps", "--python", str(python), str(wheel)])
    return python


def test_the_installed_wheel_is_a_provider_airflow_lists_with_its_plugin(
    installed: Path, tmp_path: Path
) -> None:
    shutil.copytree(REPO / "dags_examples", tmp_path / "dags", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHONPATH", "VIRTUAL_ENV"))}
    env |= {
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    python = str(installed)

    def airflow(*argv: str) -> str:
        return run([python, *argv], env=env, cwd=tmp_path).stdout

    where = airflow("-c", "import airflow_ft_provider as p; print(p.__file__)").strip()
    assert where.startswith(str(installed.parents[1])), where  # the wheel's copy, not the clone's
    providers = json.loads(airflow("-m", "airflow", "providers", "list", "--output", "json"))
    listed = {p["package_name"]: p["version"] for p in providers}
    assert listed.get("airflow-ft-provider") == __version__, listed
    plugins = json.loads(airflow("-m", "airflow", "plugins", "--output", "json"))
    assert "ft_failover" in [p["name"] for p in plugins], plugins
    bag = json.loads(airflow("-c", DAG_BAG).strip().splitlines()[-1])
    assert bag["errors"] == {} and len(bag["dags"]) >= 5, bag
