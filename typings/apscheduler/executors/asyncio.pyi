from asyncio import Future

from apscheduler.executors.base import BaseExecutor

class AsyncIOExecutor(BaseExecutor):
    _pending_futures: set[Future[None]]
