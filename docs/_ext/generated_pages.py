"""The pages generated from the code when the build starts, so they cannot drift from it:

* ``_generated/config-reference.md`` from ``get_provider_info()``: the ``[ft_provider]`` options as
  Airflow registers them (key, default, type, description); ``configuration.md`` includes it;
* ``_generated/cli-reference.md`` from the command line's own parser (``cli.build_parser``): every
  command's ``--help``; ``cli.md`` includes it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from sphinx.application import Sphinx


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def config_reference() -> str:
    """The reference as Markdown: one row per option, in the metadata's order."""
    from airflow_ft_provider.get_provider_info import CONFIG_SECTION, get_provider_info

    config = get_provider_info()["config"]
    assert isinstance(config, dict)
    section = config[CONFIG_SECTION]
    lines = [
        f"Section `[{CONFIG_SECTION}]` of `airflow.cfg` (or `AIRFLOW__FT_PROVIDER__<KEY>`): "
        f"{section['description']}",
        "",
        "| key | default | type | description |",
        "|---|---|---|---|",
    ]
    for key, option in section["options"].items():
        default = f"`{option['default']}`" if option.get("default") is not None else "unset"
        lines.append(
            f"| `{key}` | {default} | {option.get('type') or ''} | {_cell(option.get('description'))} |"
        )
    return "\n".join(lines) + "\n"


def cli_reference() -> str:
    from airflow_ft_provider.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help text to the terminal's width
    parser = build_parser()
    sections = [("airflow-ft", parser)]
    for action in parser._actions:  # argparse offers no public way to reach its subcommands
        if isinstance(action, argparse._SubParsersAction):
            sections += [(f"airflow-ft {name}", sub) for name, sub in action.choices.items()]
    out = []
    for title, command in sections:
        out += [f"## `{title}`", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(out)


GENERATED: dict[str, Callable[[], str]] = {
    "_generated/config-reference.md": config_reference,
    "_generated/cli-reference.md": cli_reference,
}


def _write(app: Sphinx) -> None:
    for name, generate in GENERATED.items():
        target = Path(app.srcdir) / name
        target.parent.mkdir(exist_ok=True)
        text = generate()
        if not target.exists() or target.read_text() != text:
            target.write_text(text)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", _write)
    return {"parallel_read_safe": True, "version": "1"}
