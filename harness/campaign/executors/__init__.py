"""Campaign executors: what runs the trials `campaign apply` found still to run.

One small base class, `Executor`, and a registry of name -> lazily imported class:

- `local` (default): this process's `TrialQueue` on the hosts of the hosts file;
- `ray`: one Ray task per trial on the worker nodes of a Ray cluster, each node running
  the harness with its own engines (`harness/campaign/executors/ray/`, extra `ray`).

The campaign loop (plan, resume, the journal, the results) is the same for every one:
`harness.campaign.ops.apply_campaign` asks the executor to get ready, to clean each
unfinished trial before it is run again, and to run the list.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.errors import InputError, RegistryError
from harness.results import TrialRecord

# name -> (module, class, the extra its imports need)
EXECUTORS: dict[str, tuple[str, str, str | None]] = {
    "local": ("harness.campaign.executors.local", "LocalExecutor", None),
    "ray": ("harness.campaign.executors.ray.driver", "RayExecutor", "ray"),
}


class Executor(ABC):
    """Runs a campaign's trials; writes each one's final result into the run dir once."""

    name: str
    cancelled: bool = False  # stopped by a signal before the end

    @abstractmethod
    def prepare(self, run_dir: Path, camp: Any, substrates: dict[str, Any],
                log: Callable[[str], None]) -> None:
        """Check that trials can run (hosts, engines, a cluster) before anything starts."""

    @abstractmethod
    def clean(self, t: dict[str, Any]) -> None:
        """Tear down what an unfinished earlier run of planned trial `t` left, and keep
        its evidence aside (`move_aside`) so that it is run again from scratch."""

    @abstractmethod
    def run(self, todo: list[dict[str, Any]], on_change: Callable[[Any], None]
            ) -> list[TrialRecord]:
        """Run the planned trials `todo`; their records, once each."""

    def hosts(self) -> dict[str, str]:
        """Where trials ran: host or node -> "ok" or why it was drained."""
        return {}


def get_executor(name: str, **options: Any) -> Executor:
    """The executor `name` made with `options`; one-line errors for an unknown name and
    for an executor whose extra is not installed (with the install command)."""
    if name not in EXECUTORS:
        raise RegistryError("executor", name, list(EXECUTORS))
    module, cls, extra = EXECUTORS[name]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        if extra and exc.name and exc.name.split(".")[0] == extra:
            raise InputError(f"the {name} executor needs the optional extra {extra!r} "
                             f"(pip install 'harness[{extra}]'; scripts/setup.sh installs "
                             "it)", key="--executor") from None
        raise
    return getattr(mod, cls)(**options)
