"""Task packages: the task.toml model, loading and validation, the scaffold."""

from harness.task.load import (
    content_sha256,
    discover_tasks,
    load_task,
    network_problem,
    read_text,
)
from harness.task.model import HOSTNAME_RE, NodeSpec, Task, TaskToml

__all__ = ["HOSTNAME_RE", "NodeSpec", "Task", "TaskToml", "content_sha256", "discover_tasks",
           "load_task", "network_problem", "read_text"]
