"""Not an MCP server: reads its stdin and never answers (until EOF)."""

import sys

for _line in sys.stdin:
    pass
