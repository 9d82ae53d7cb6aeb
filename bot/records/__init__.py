"""Shapes that the chat core and the store share, outside the engine: the conversation key, inbox
items and approval records."""
