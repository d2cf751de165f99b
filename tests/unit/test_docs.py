"""The documentation site (docs/, Sphinx + MyST) builds with warnings as errors, its configuration
reference is the provider's metadata, and the README stays a short front page that links into it."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs-site")
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


def test_every_page_is_built_and_reachable_from_the_index(site):
    pages = {p.stem for p in (REPO / "docs").glob("*.md")}
    assert {p.stem for p in site.glob("*.html")} >= pages
    index = (site / "index.html").read_text()
    assert [p for p in pages - {"index"} if f'href="{p}.html"' not in index] == []


def test_the_configuration_reference_lists_every_key_airflow_registers_with_its_default(site):
    from airflow_ft_provider.get_provider_info import CONFIG_SECTION, get_provider_info

    config = get_provider_info()["config"]
    assert isinstance(config, dict)
    options = config[CONFIG_SECTION]["options"]
    page = (site / "configuration.html").read_text()
    key_cell = r"<td><p><code[^>]*><span class=\"pre\">([^<]+)</span></code></p></td>"
    rows = dict(re.findall(rf"<tr[^>]*>{key_cell}\s*<td><p>(.*?)</p></td>", page))
    assert set(rows) == set(options), set(rows) ^ set(options)
    for key, option in options.items():
        shown = re.sub(r"<[^>]+>", "", rows[key])
        assert shown == (option["default"] if option["default"] is not None else "unset"), key


def test_the_readme_is_a_short_front_page_whose_links_exist():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert text.index("## The two commands") < text.index("## Documentation")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert [t for t in targets if not (REPO / t).exists()] == []
    assert {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")} - set(targets) <= {
        "docs/index.md",
        "docs/benchmarks.md",  # the README links bench/README.md, which that page includes
        "docs/changelog.md",  # CHANGELOG.md likewise
    }


def python_snippets() -> list[tuple[str, int, str]]:
    """Every ```python block of the README and the docs: (file, block number, dedented code)."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        blocks = re.findall(r"^ *```python\n(.*?)^ *```", path.read_text(), flags=re.MULTILINE | re.DOTALL)
        found += [(path.name, n, textwrap.dedent(code)) for n, code in enumerate(blocks)]
    return found


@pytest.mark.parametrize(("page", "number", "code"), python_snippets(), ids=lambda v: str(v)[:20])
def test_every_python_snippet_parses_and_a_whole_pipeline_builds_its_dag(page, number, code):
    tree = ast.parse(code, filename=f"{page} block {number}")
    if not code.startswith("from airflow.sdk import DAG") or "..." in code:
        return  # a fragment: parsing is what can be checked
    for node in ast.walk(tree):  # `with DAG(...):` binds the DAG, so that the test can look at it
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "DAG":
                    item.optional_vars = ast.Name("built_dag", ast.Store())
    namespace: dict[str, object] = {}
    exec(compile(ast.fix_missing_locations(tree), f"{page} block {number}", "exec"), namespace)  # noqa: S102
    from airflow_ft_provider.model.parsed import parsed_description

    dag = namespace["built_dag"]
    stages = parsed_description(dag).graph.stages
    assert stages and set(stages) <= set(dag.task_dict)  # every stage a task of the DAG the snippet builds


def test_the_command_and_api_references_come_from_the_code(site):
    from airflow_ft_provider.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    cli = (site / "cli.html").read_text()
    assert [name for name in commands.choices if f"airflow-ft {name}" not in cli] == []
    assert "--aws-conn-id" in cli and "--pipeline" in cli  # the options, as the parser has them
    reference = (site / "reference.html").read_text()
    for name in ("FailoverPipeline", "SparkStageOperator", "PartitionSensor", "PartitionTrigger"):
        assert 'id="airflow_ft_provider.' in reference and f"{name}</span>" in reference, name


def test_the_concept_pictures_are_what_the_failover_core_computes_and_are_shown(site):
    sys.path.insert(0, str(REPO / "docs" / "_ext"))
    try:
        import pictures
    finally:
        sys.path.remove(str(REPO / "docs" / "_ext"))
    drawn = pictures.drawn()
    stale = [p.name for p, svg in drawn.items() if not p.exists() or p.read_text() != svg]
    assert stale == [], f"redraw them (build the docs) and commit: {stale}"
    # the restart sets drawn are the core's: score's failure restarts its region and the consumers,
    # not extract or clean; a lost scored backtracks to score's region
    by_name = {p.stem: svg for p, svg in drawn.items()}
    restarting = re.compile(r'fill="#f2a93b" stroke="#333"/><text [^>]*>([^<]+)</text>')
    assert set(restarting.findall(by_name["score-fails"])) == {
        "enrich",
        "daily_revenue",
        "customer_aggregates",
    }
    assert set(restarting.findall(by_name["scored-lost"])) == {"enrich", "score", "customer_aggregates"}
    # try 2 recomputes batches 4-5 against unchanged inputs, all six against a rebuilt one
    computed = re.findall(r'fill="#f2a93b" stroke="#333"/>', by_name["checkpoint-resume"])
    assert len(computed) == 2 + 6
    reused = re.compile(r'fill="#72b77a" stroke="#333"/><text [^>]*>([^<]+)</text>')
    assert set(reused.findall(by_name["score-fails-reused"])) == {
        "daily_revenue",
        "customer_aggregates",
    }  # enrich: pipelined
    assert set(restarting.findall(by_name["score-fails-reused"])) == {"enrich"}
    pages = ("concepts", "checkpointed-stages", "reuse")
    shown = "".join((site / f"{page}.html").read_text() for page in pages)
    assert all(f"{name}.svg" in shown for name in by_name)


def test_every_metric_the_code_sends_is_in_the_monitoring_reference_and_no_other():
    source = (REPO / "airflow_ft_provider" / "metrics.py").read_text()
    calls = re.findall(r'_(?:incr|timing|gauge)\(f?"([^"]+)"', source)
    sent = {re.sub(r"\{[^}]*\}", "<>", name) for name in calls}
    table = (REPO / "docs" / "monitoring.md").read_text()
    documented = {re.sub(r"<[^>]*>", "<>", name) for name in re.findall(r"`(ft\.[a-z_.<>|\\]+)`", table)}
    assert len(sent) > 20 and sent == documented
