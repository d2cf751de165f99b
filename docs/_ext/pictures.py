"""The concept pictures (``docs/pictures/*.svg``), drawn from the failover core itself: the example
pipeline's graph, its regions and the tasks a failure restarts are what ``failover/`` computes, so a
picture cannot show a rule the code does not follow. The files are committed (the pages read on
GitHub too); the build redraws them, and ``tests/unit/test_docs.py`` fails when a committed one differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sphinx.application import Sphinx

from airflow_ft_provider.checkpoints.fencing import CompletedCheckpoint, restore_decision
from airflow_ft_provider.failover.failover_strategies import RestartPipelinedRegionFailoverStrategy
from airflow_ft_provider.failover.graph import DistributionPattern, ResultPartitionType, StageGraph
from airflow_ft_provider.failover.topology import Topology
from airflow_ft_provider.partitions.provenance import lineage_key

PICTURES = Path(__file__).resolve().parent.parent / "pictures"
BOX_W, BOX_H, COL_W, ROW_H, MARGIN = 130, 26, 175, 40, 24
COLOURS = {
    "failed": "#e45756",
    "restart": "#f2a93b",
    "kept": "#ffffff",
    "lost": "#e45756",
    "reused": "#72b77a",
}


def example_graph() -> StageGraph:
    """The pipeline of the README and the concepts page."""
    blocking, pipelined = ResultPartitionType.BLOCKING, ResultPartitionType.PIPELINED
    graph = StageGraph()
    for name, parallelism in (("extract", 4), ("clean", 4), ("enrich", 1), ("score", 1)):
        graph.add_stage(name, parallelism)
    graph.add_stage("daily_revenue", 1)
    graph.add_stage("customer_aggregates", 1)
    graph.add_result("raw", "extract", blocking)
    graph.add_result("cleaned", "clean", blocking)
    graph.add_result("enriched", "enrich", pipelined)
    graph.add_result("scored", "score", blocking)
    graph.consume("clean", "raw", DistributionPattern.POINTWISE)
    graph.consume("enrich", "cleaned")
    graph.consume("score", "enriched")
    graph.consume("daily_revenue", "scored")
    graph.consume("customer_aggregates", "scored")
    return graph


@dataclass(frozen=True)
class Picture:
    name: str
    caption: str
    failed: str | None = None
    lost: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()  # results whose re-computed content is the same as before (reuse)


PICTURE_SET = (
    Picture(
        "score-fails-reused",
        "score fails, its new output holds the same rows: the consumer regions reuse their outputs",
        failed="score",
        unchanged=("scored",),
    ),
    Picture("regions", "Failover regions: tasks joined by pipelined exchanges (dashed) restart together"),
    Picture("score-fails", "score fails: its region restarts, then every consumer region", failed="score"),
    Picture(
        "scored-lost",
        "daily_revenue fails and finds scored lost: backtracking rebuilds it, consumers follow",
        failed="daily_revenue",
        lost=("scored",),
    ),
)


def draw(graph: StageGraph, picture: Picture) -> str:
    """``picture`` as SVG: tasks in columns by depth, exchanges as lines, regions outlined, and the
    restart set (as the region failover strategy computes it) filled."""
    topology = Topology(graph)
    strategy = RestartPipelinedRegionFailoverStrategy(graph)
    restart = strategy.tasks_to_restart(picture.failed, picture.lost) if picture.failed else set()
    reused = _reused(graph, restart, picture.unchanged)
    depth = _depths(graph)
    columns: dict[int, list[str]] = {}
    for stage in graph.stages.values():
        columns.setdefault(depth[stage.name], []).extend(stage.task_ids)
    rows = max(len(tasks) for tasks in columns.values())
    at: dict[str, tuple[float, float]] = {}
    for column, tasks in columns.items():
        top = MARGIN + (rows - len(tasks)) * ROW_H / 2
        for row, task in enumerate(tasks):
            at[task] = (MARGIN + column * COL_W, top + row * ROW_H)
    width = MARGIN * 2 + (max(columns) + 1) * COL_W - (COL_W - BOX_W)
    height = MARGIN * 2 + rows * ROW_H + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{picture.caption}</title>",
    ]
    for link in topology.links:
        for partition in link.partitions:
            producer = topology.task_names[topology.partition_producer[partition]]
            lost = topology.partition_names[partition].split("[")[0] in picture.lost
            for consumer in (topology.task_names[t] for t in link.consumers):
                out.append(_edge(at[producer], at[consumer], blocking=link.blocking, lost=lost))
    for region in strategy.regions:
        if len(region) > 1:
            out.append(_outline([at[t] for t in region]))
    for task, (x, y) in at.items():
        state = (
            "failed"
            if task == picture.failed
            else "reused"
            if task in reused
            else "restart"
            if task in restart
            else "kept"
        )
        out.append(
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="{COLOURS[state]}" '
            f'stroke="#333"/><text x="{x + BOX_W / 2}" y="{y + 17}" text-anchor="middle">{task}</text>'
        )
    out.append(f'<text x="{MARGIN}" y="{height - 14}" fill="#333">{_legend(picture)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _reused(graph: StageGraph, restart: set[str], unchanged: tuple[str, ...]) -> set[str]:
    """The restarted tasks that publish their committed output again instead of running Spark
    (docs/reuse.md): all their inputs and outputs blocking, and the lineage key of what they read now
    (``partitions/provenance.lineage_key``: the stage's identity and its inputs' content) the one
    their output was computed from. An input is new content if its producer restarted, unless
    ``unchanged`` says the recomputation wrote the same rows."""
    reads: dict[str, list[str]] = {}
    for consumption in graph.consumptions:
        reads.setdefault(consumption.stage, []).append(consumption.result)
    restarted_stages = {task.split("[")[0] for task in restart}
    found = set()
    for task in restart:
        stage = task.split("[")[0]
        inputs = reads.get(stage, [])
        outputs = [r for r in graph.results.values() if r.producer == stage]
        blocking = all(graph.results[r].result_type.is_reconsumable for r in inputs) and all(
            r.result_type.is_reconsumable for r in outputs
        )
        if not inputs or not blocking:
            continue
        before = {r: f"{r}@1" for r in inputs}
        after = {
            r: before[r] if r in unchanged or graph.results[r].producer not in restarted_stages else f"{r}@2"
            for r in inputs
        }
        if lineage_key(stage, after) == lineage_key(stage, before):
            found.add(task)
    return found


def _depths(graph: StageGraph) -> dict[str, int]:
    upstream = {name: graph.upstream_stages(name) for name in graph.stages}
    depth: dict[str, int] = {}
    while len(depth) < len(upstream):
        for name, before in upstream.items():
            if name not in depth and all(b in depth for b in before):
                depth[name] = 1 + max((depth[b] for b in before), default=-1)
    return depth


def _edge(start: tuple[float, float], end: tuple[float, float], *, blocking: bool, lost: bool) -> str:
    (x1, y1), (x2, y2) = start, end
    dash = "" if blocking else ' stroke-dasharray="5,4"'
    colour = COLOURS["lost"] if lost else "#777"
    return (
        f'<line x1="{x1 + BOX_W}" y1="{y1 + BOX_H / 2}" x2="{x2}" y2="{y2 + BOX_H / 2}" '
        f'stroke="{colour}" stroke-width="1.5"{dash}/>'
    )


def _outline(boxes: list[tuple[float, float]]) -> str:
    left, top = min(x for x, _ in boxes) - 8, min(y for _, y in boxes) - 8
    right, bottom = max(x for x, _ in boxes) + BOX_W + 8, max(y for _, y in boxes) + BOX_H + 8
    return (
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" rx="9" '
        'fill="none" stroke="#4c78a8" stroke-width="2" stroke-dasharray="8,4"/>'
    )


def _legend(picture: Picture) -> str:
    if picture.failed is None:
        return "solid: blocking exchange (committed to S3) · dashed: pipelined · blue outline: a region"
    parts = [f"red: {picture.failed} failed", "orange: restarts", "white: untouched, outputs read again"]
    if picture.unchanged:
        parts.insert(2, f"green: {', '.join(picture.unchanged)} unchanged, output reused (no Spark)")
    if picture.lost:
        parts.insert(1, f"red lines: {', '.join(picture.lost)} lost")
    return " · ".join(parts)


def draw_checkpoints(batches: int = 6, failed_in: int = 4) -> str:
    """A checkpointed stage's tries as rows of micro-batches: try 1 fails in batch ``failed_in``; try 2
    resumes or starts fresh as ``checkpoints/fencing.restore_decision`` decides, for unchanged inputs
    and for an input rebuilt by failover in between."""
    inputs = {"scored": "attempt-1"}
    taken = CompletedCheckpoint(failed_in - 1, inputs, failed_in, batches, taken_by_try=1)
    cases = [
        ("inputs unchanged", restore_decision(taken, inputs, pipelined_input=False)),
        ("scored rebuilt", restore_decision(taken, {"scored": "attempt-2"}, pipelined_input=False)),
    ]
    cell, label_w, row_h = 46, 170, 44
    width, height = max(600, MARGIN * 2 + label_w + batches * cell), MARGIN * 2 + row_h * 3 + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        "<title>A checkpointed stage's retry resumes only against the inputs its checkpoint saw</title>",
    ]

    def row(y: float, label: str, states: list[str]) -> None:
        out.append(f'<text x="{MARGIN}" y="{y + 18}">{label}</text>')
        fills = {
            "done": "#9ecae9",
            "failed": COLOURS["failed"],
            "skipped": "#eeeeee",
            "run": COLOURS["restart"],
        }
        for batch, state in enumerate(states):
            x = MARGIN + label_w + batch * cell
            out.append(
                f'<rect x="{x}" y="{y}" width="{cell - 6}" height="26" rx="4" fill="{fills[state]}" '
                f'stroke="#333"/><text x="{x + (cell - 6) / 2}" y="{y + 17}" '
                f'text-anchor="middle">{batch}</text>'
            )

    first = ["done"] * failed_in + ["failed"] + ["skipped"] * (batches - failed_in - 1)
    row(MARGIN, "try 1", first)
    for n, (label, decision) in enumerate(cases, start=1):
        start = decision.checkpoint.checkpoint_id + 1 if decision.resume and decision.checkpoint else 0
        row(MARGIN + n * row_h, f"try 2, {label}", ["skipped"] * start + ["run"] * (batches - start))
    out.append(
        f'<text x="{MARGIN}" y="{height - 14}" fill="#333">blue: committed with a checkpoint · red: fails · '
        "orange: computed by try 2 · grey: not computed</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def drawn() -> dict[Path, str]:
    """Every picture, as the code draws it now."""
    graph = example_graph()
    pictures = {PICTURES / f"{p.name}.svg": draw(graph, p) for p in PICTURE_SET}
    pictures[PICTURES / "checkpoint-resume.svg"] = draw_checkpoints()
    return pictures


def _redraw(app: Sphinx) -> None:
    PICTURES.mkdir(exist_ok=True)
    for path, svg in drawn().items():
        if not path.exists() or path.read_text() != svg:
            path.write_text(svg)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", _redraw)
    return {"parallel_read_safe": True}
