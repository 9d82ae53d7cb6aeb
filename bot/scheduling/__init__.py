"""Scheduled agents: schedules from profiles and from the CLI, run through AgentService with trigger
`schedule`, posted to a channel, recorded in `schedule_runs`; one leader per database runs them.

Kept import-light: `bot.cli` imports the `schedule` sub-app from here at start-up."""
