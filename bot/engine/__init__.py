"""The agent engine. Imports no platform library and no database library."""
