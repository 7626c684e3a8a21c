"""Literature search: arXiv, GitHub issues, Stack Exchange and the web, cached, rate-limit aware,
with knowledge-base matches when the network is unreachable. Usable without MCP."""

from trainsleuth.tools.literature.config import LiteratureConfig
from trainsleuth.tools.literature.query import build_query
from trainsleuth.tools.literature.search import LiteratureReport, search_literature

__all__ = ["LiteratureConfig", "LiteratureReport", "build_query", "search_literature"]
