"""The local executor: this process's `TrialQueue` on the hosts of the hosts file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.campaign.executors import Executor
from harness.campaign.hosts import HostSet
from harness.campaign.queue import TrialQueue, clean_unfinished
from harness.errors import InputError
from harness.results import TrialRecord
from harness.trial import run_async


class LocalExecutor(Executor):
    """Every trial in this process, placed on the hosts file's hosts (`HostSet`)."""

    name = "local"

    def __init__(self, address: str | None = None):
        if address:
            raise InputError("only with --executor ray", key="--address")
        self.hosts_set: HostSet | None = None
        self.queue: TrialQueue | None = None

    def prepare(self, run_dir: Path, camp: Any, substrates: dict[str, Any],
                log: Callable[[str], None]) -> None:
        self.run_dir, self.camp, self.subs, self.log = run_dir, camp, substrates, log
        self.hosts_set = HostSet.for_campaign(camp, substrates)
        self.hosts_set.preflight(sorted(substrates), log=log)

    def clean(self, t: dict[str, Any]) -> None:
        clean_unfinished(self.run_dir, t, self.hosts_set)

    def run(self, todo: list[dict[str, Any]], on_change: Callable[[Any], None]
            ) -> list[TrialRecord]:
        self.queue = TrialQueue(self.run_dir, self.camp, self.subs, on_change=on_change,
                                hosts=self.hosts_set, log=self.log)
        records = run_async(self.queue.run(todo)) if todo else []
        self.cancelled = self.queue.stopping
        return records

    def hosts(self) -> dict[str, str]:
        hs = self.hosts_set
        return {h: hs.drained.get(h, "ok") for h in hs.names} if hs else {}
