from datetime import datetime

EVENT_JOB_MAX_INSTANCES: int
EVENT_ALL: int

class SchedulerEvent:
    code: int

class JobEvent(SchedulerEvent):
    job_id: str
    jobstore: str

class JobSubmissionEvent(JobEvent):
    scheduled_run_times: list[datetime]
