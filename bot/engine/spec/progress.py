"""How much of a turn's work chat shows while it runs: the one type for `progress:` in AGENT.md and
`YOKEBOT_PROGRESS_STEPS` (`none`: only "working…"; `compact`: one line per tool step; `full`: with the first line
of each result; bot/chat/core/progress.py draws them)."""

from typing import Literal

ProgressMode = Literal["none", "compact", "full"]
