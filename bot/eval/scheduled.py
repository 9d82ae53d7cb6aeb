"""A scheduled-report scenario: the schedule runs the way `yokebot schedule run` runs it (ScheduleRunner:
claim, a turn with trigger `schedule`, post the report to `post_to`), posting to the recording adapter."""

from __future__ import annotations

from bot.app import App
from bot.engine.errors import YokebotError
from bot.eval.scenario import ScheduleRun
from bot.scheduling.model import Schedule, utcnow
from bot.scheduling.runs import ScheduleRunner
from bot.scheduling.store import ScheduleStore


async def run_schedule(app: App, agent: str, spec: ScheduleRun, prompt: str) -> str:
    schedule = Schedule(name=f"{agent}/{spec.name or 'eval'}", agent=agent, source="runtime", prompt=prompt,
                        every="1d", post_to=spec.post_to, timezone=app.profile(agent).timezone)
    runner = ScheduleRunner(ScheduleStore(app.engine), app.service, app.store, app.notifier,
                            grace_seconds=app.settings.schedule_misfire_grace_seconds)
    outcome = await runner.run(schedule, utcnow(), kind="manual")
    if outcome is None or outcome.session_id is None:
        raise YokebotError(f"the scheduled run of {schedule.name} did not start a turn")
    return outcome.session_id
