"""Mattermost (REST API v4 and its WebSocket event stream): docs/mattermost.md."""
