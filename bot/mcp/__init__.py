"""Tools from Model Context Protocol servers (docs/mcp.md)."""
