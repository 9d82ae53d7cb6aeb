"""Shapes that the chat core and the store share, outside the engine: the conversation key and
inbox items. Approval records live with their feature, in bot/approvals/records.py."""
