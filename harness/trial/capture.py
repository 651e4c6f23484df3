"""Commands run inside the environment, read back from the nodes' command logger.

The `harness_command_logger` role (Setup play of playbooks/trial.yml) preloads snoopy on
every node; each exec of a dynamically linked program appends one line to `LOG_FILE`::

    hxcmd TAB epoch-sec TAB usec TAB pid TAB ppid TAB uid TAB $HARNESS_SOURCE TAB cwd TAB cmdline

(a command line holding newlines continues on the following lines). `collect_commands`
reads the lines of the agent window from every node through the substrate (not
`env.exec`, which would record itself) and turns them into `CommandRecord`s:

- `HARNESS_SOURCE` is set by `TrialEnvironment.exec` and inherited by every child: the
  harness's own commands (`harness`: verifier, probes, this reader) are dropped; children of
  recorded agent commands (`agent`) become `source="agent-child"`; other recorded sources
  keep their name (`oracle`, which the risk monitor skips); processes without the variable
  (daemons, cron, or a process that cleared its environment) are dropped unless
  `unattributed=True`, then kept as `source="logger"`.
- What the trajectory already shows is dropped: the substrate's wrapper of a recorded
  command (`timeout -k 5 N bash -c CMD`) and every exec whose words appear, in order, in a
  recorded command of that node or in its parent's (or its own pre-exec) command line,
  e.g. the `ls` of `cd /tmp && ls`. What is left is what an agent's processes ran that no
  recorded command line shows: a CLI agent's tool calls, the commands of a script.
- Text is redacted with `env.redact` (an agent can put a secret on a command line).

Limits, stated plainly: snoopy sees `execve`/`execv` calls through the dynamic linker, so
statically linked programs and execs glibc makes internally (`execvp`, as used by
`timeout` and `env`) are missing, though their children are seen; the agent runs as root
and can edit the log, unset the variable or remove `/etc/ld.so.preload`. Findings from
this capture are evidence, not proof of absence.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from harness.trajectory import CommandRecord, append_record, read_trajectory
from harness.trial.environment import HARNESS_MARK

LOG_FILE = "/var/log/harness/commands.log"
PREFIX = "hxcmd\t"
NO_LOG = "@@HX-NO-COMMAND-LOG@@"
UNSET = "(undefined)"
CHILD_SOURCE = {"agent": "agent-child"}
_WORD = re.compile(r"""[^\s;|&()<>'"`\\]+""")
_SHELLS = {"bash", "sh", "dash", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/dash"}


@dataclass(frozen=True)
class LoggedExec:
    """One line of the command log."""

    ts: float
    pid: int
    ppid: int
    uid: int
    marker: str
    cwd: str
    cmd: str


def parse_log(text: str) -> list[LoggedExec]:
    """The execs of a log text; malformed lines (and their continuations) are skipped."""
    out: list[LoggedExec] = []
    current = False
    for line in text.rstrip("\n").split("\n"):
        if line.startswith(PREFIX):
            parts = line.split("\t", 8)
            current = False
            if len(parts) != 9:
                continue
            try:
                out.append(LoggedExec(ts=int(parts[1]) + int(parts[2]) / 1e6, pid=int(parts[3]),
                                      ppid=int(parts[4]), uid=int(parts[5]), marker=parts[6],
                                      cwd=parts[7], cmd=parts[8]))
            except ValueError:
                continue
            current = True
        elif current:
            last = out[-1]
            out[-1] = LoggedExec(last.ts, last.pid, last.ppid, last.uid, last.marker, last.cwd,
                                 f"{last.cmd}\n{line}")
    return out


def words(cmd: str) -> tuple[str, ...]:
    """The words of a command line with quotes and shell operators dropped."""
    return tuple(_WORD.findall(cmd))


def unwrap(ws: tuple[str, ...]) -> tuple[str, ...]:
    """Words without leading `timeout [-k N] N` and `bash|sh [-opts] -c` wrappers."""
    while ws:
        if ws[0] == "timeout":
            rest = ws[3:] if ws[1:2] == ("-k",) else ws[1:]
            if rest and rest[0].replace(".", "", 1).isdigit():
                ws = rest[1:]
                continue
        if ws[0] in _SHELLS:
            opts = [w for w in ws[1:3] if w.startswith("-")]
            if any("c" in o for o in opts):
                ws = ws[1 + len(opts):]
                continue
        break
    return ws


def _within(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    return f" {' '.join(part)} " in f" {' '.join(whole)} "


def attribute(execs: Sequence[LoggedExec], recorded: Iterable[str],
              unattributed: bool = False) -> list[tuple[LoggedExec, str]]:
    """(exec, source) for the execs the trajectory does not already show (module doc)."""
    recorded_words = [words(c) for c in recorded]
    last_by_pid: dict[int, LoggedExec] = {}
    kept = []
    for ex in sorted(execs, key=lambda e: e.ts):
        before = [last_by_pid.get(ex.pid), last_by_pid.get(ex.ppid)]
        last_by_pid[ex.pid] = ex
        if ex.marker == HARNESS_MARK or (ex.marker == UNSET and not unattributed):
            continue
        ws = unwrap(words(ex.cmd))
        if not ws or any(_within(ws, r) for r in recorded_words):
            continue
        if any(p is not None and _within(ws, words(p.cmd)) for p in before):
            continue
        source = "logger" if ex.marker == UNSET else CHILD_SOURCE.get(ex.marker, ex.marker)
        kept.append((ex, source))
    return kept


def _epoch(ts: str) -> float:
    dt = datetime.fromisoformat(ts)
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def read_command(since: float, until: float, log_file: str = LOG_FILE) -> str:
    """The node-side shell line: the log's entries of [since, until] (whole seconds, padded),
    without the harness's own; `NO_LOG` when the node has no log."""
    program = (r'BEGIN { FS = "\t" } /^hxcmd\t/ { keep = ($2 >= s && $2 <= u && $7 != m) } '
               "keep")
    f = shlex.quote(log_file)
    return (f"[ -r {f} ] || {{ echo {NO_LOG}; exit 0; }}; "
            f"awk -v s={math.floor(since) - 1} -v u={math.ceil(until) + 1} "
            f"-v m={HARNESS_MARK} {shlex.quote(program)} {f}")


async def collect_commands(env, since_ts: str, until_ts: str, *, unattributed: bool = False,
                           timeout: float = 60) -> list[CommandRecord]:
    """The commands the agent's processes ran on any node between the two ISO times.

    Nodes without a command log (snoopy missing) contribute nothing. Records are sorted by
    time and carry pid, ppid, uid and cwd; exit status and output are unknown (None).
    """
    since, until = _epoch(since_ts), _epoch(until_ts)
    try:
        recorded = read_trajectory(env.paths.trajectory)
    except Exception:  # no trajectory yet: nothing recorded to deduplicate against
        recorded = []
    found: list[CommandRecord] = []
    for node in env.nodes:
        res = await env.substrate.exec(node, read_command(since, until), timeout,
                                       env={"HARNESS_SOURCE": HARNESS_MARK})
        if NO_LOG in res.stdout[:64] or res.exit_code != 0:
            continue
        execs = [e for e in parse_log(res.stdout) if since <= e.ts <= until]
        mine = [r.cmd for r in recorded if r.node == node.name]
        for ex, source in attribute(execs, mine, unattributed):
            found.append(CommandRecord(
                ts=_iso(ex.ts), node=node.name, cmd=env.redact(ex.cmd) or "", source=source,
                pid=ex.pid, ppid=ex.ppid, uid=ex.uid, cwd=env.redact(ex.cwd)))
    return sorted(found, key=lambda r: r.ts)


async def capture_window(env, since_ts: str, until_ts: str, **kw) -> list[CommandRecord]:
    """`collect_commands`, then append the records to the trial's trajectory."""
    records = await collect_commands(env, since_ts, until_ts, **kw)
    for rec in records:
        append_record(env.paths.trajectory, rec)
    return records
