from collections.abc import Callable, Mapping, Sequence
from typing import Any

class Job:
    id: str
    name: str
    func: Callable[..., Any]
    args: Sequence[Any]
    kwargs: Mapping[str, Any]
