"""The shape of the package, checked: layers, no import cycles, module size, lint, format and types.

The layers (pyproject.toml, ``[tool.importlinter]``), bottom to top: ``safe_json`` <- ``failover`` (the
pure core) <- ``partitions`` <- ``model | checkpoints`` <- ``hooks | execution | faults | _compat`` <-
``recovery`` <- ``run_end | stage_settings`` <- ``pipeline | triggers`` <- ``operators | sensors`` <-
``plugins | cli``.
import-linter reads every import statement, function-level ones too, so a cycle cannot hide behind a
late import.
"""

from __future__ import annotations

import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "airflow_ft_provider"
MAX_MODULE_LINES = 350


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)


def tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_the_layers_hold_and_the_core_imports_no_airflow_spark_or_boto3():
    result = run(tool("lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_no_module_of_the_package_takes_part_in_an_import_cycle():
    import grimp

    graph = grimp.build_graph("airflow_ft_provider", cache_dir=None)
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    try:
        graphlib.TopologicalSorter(imports).prepare()
    except graphlib.CycleError as cycle:
        pytest.fail(f"import cycle: {' -> '.join(cycle.args[1])}")


def test_no_product_module_is_over_the_size_limit():
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES} == {}


# The unit tests at the top of tests/unit that test the repository rather than a module of the package.
REPOSITORY_TESTS = {
    "architecture",
    "bad_input_catalogue",
    "debian_packages",
    "demo_airflow_home",
    "failure_table",
}
REPOSITORY_TESTS |= {
    "docs",
    "release",
    "spark_host",
}  # docs/ and the README; the harness's second host (services/spark_host.py)


def test_the_unit_tests_mirror_the_package():
    """A module's tests are where its path says: ``airflow_ft_provider/<package>/<module>.py`` is tested by
    ``tests/unit/<package>/test_<module>.py`` (or ``test_<module>_<concern>.py``)."""
    unit = REPO / "tests" / "unit"
    misplaced = []
    for test in sorted(unit.rglob("test_*.py")):
        folder = test.parent.relative_to(unit)
        package = PACKAGE / folder
        names = {p.stem.lstrip("_") for p in package.glob("*.py")} | {p.name for p in package.glob("*/")}
        tested = test.stem.removeprefix("test_")
        if folder == Path(".") and tested in REPOSITORY_TESTS:
            continue
        if not any(tested == name or tested.startswith(name + "_") for name in names - {"__init__"}):
            misplaced.append(str(test.relative_to(unit)))
    assert misplaced == []


# Every Python file of the repository: the package, and what tests, measures and shows it.
LINTED = ("airflow_ft_provider", "tests", "bench", "ft_harness", "demo", "dags_examples")


def test_ruff_finds_nothing_and_every_python_file_is_formatted():
    lint = run(tool("ruff"), "check", *LINTED)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    formatted = run(tool("ruff"), "format", "--check", *LINTED)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr


def test_mypy_finds_no_type_errors_in_the_package(mypy_result):
    returncode, output = mypy_result  # mypy on the package, started when collection ended (conftest.py)
    assert returncode == 0, output
    assert "Success: no issues found" in output
