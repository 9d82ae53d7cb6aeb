from datetime import datetime, tzinfo

from apscheduler.triggers.base import BaseTrigger

class CronTrigger(BaseTrigger):
    timezone: tzinfo
    # the fields (year, month, day, week, day_of_week, hour, minute, second) as cron expressions
    def __init__(self, *, start_date: datetime | str | None = None, end_date: datetime | str | None = None,
                 timezone: tzinfo | str | None = None, **fields: int | str | None) -> None: ...
