"""Sphinx configuration of the documentation site (``python -m sphinx -W -b html docs docs/_build``).

Pages are Markdown (MyST). The configuration reference is generated at build time from the provider's
own metadata (``get_provider_info``), the one source Airflow reads too, and the command reference from
the CLI's parser (``_ext/generated_pages.py``).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "_ext"), str(HERE.parent)]

from airflow_ft_provider import __version__  # noqa: E402

project = "airflow-ft-provider"
author = "The airflow-ft-provider authors"
release = version = __version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "generated_pages", "pictures"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_generated"]
myst_heading_anchors = 4  # "page.md#a-heading" links, as GitHub renders them
myst_enable_extensions = ["colon_fence"]
html_theme = "alabaster"
html_title = f"airflow-ft-provider {version}"
html_theme_options = {"description": "Flink's failure recovery for Spark pipelines run by Airflow"}
