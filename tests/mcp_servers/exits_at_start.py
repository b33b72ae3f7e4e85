"""Not an MCP server: exits at once, as a broken server would."""

import sys

sys.exit("exits_at_start: giving up before speaking MCP")
