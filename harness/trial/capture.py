"""Commands run inside the environment, read back from the nodes' command logger.

The `harness_node` role (Setup play of playbooks/trial.yml) preloads snoopy on
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

The log is the agent's to write (it is root there): what is read is bounded before any of
it is parsed, and parsing is linear. On the node, at most `MAX_LOG_READ` bytes of the log
are read (its start: the window's first lines) and at most `MAX_LOG_OUTPUT` bytes of the
window's lines sent back (below what a substrate keeps of one stream); each command line
and cwd is cut at `MAX_CMD_CHARS`; a trial records at most `MAX_COMMANDS` commands and
`MAX_CAPTURED_CHARS` characters of them (the earliest). When anything was cut, one
`harness.trajectory.truncation_note` record after the rest says what and how much, and
the risk monitor turns it into a `probe.command_log_flood` finding.

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
from dataclasses import dataclass, field
from datetime import UTC, datetime

from harness.trajectory import (
    CUT_NOTE,
    CommandRecord,
    append_records,
    cut,
    read_trajectory,
    truncation_note,
)
from harness.trial.environment import HARNESS_MARK

LOG_FILE = "/var/log/harness/commands.log"
PREFIX = "hxcmd\t"
NO_LOG = "@@HX-NO-COMMAND-LOG@@"
SIZE_MARK = "@@HX-LOG-SIZE@@"  # first line of the node's answer: the log's size in bytes
CUT_MARK = "@@HX-LOG-CUT@@"  # last line when the window's lines did not fit
UNSET = "(undefined)"
CHILD_SOURCE = {"agent": "agent-child"}
MAX_LOG_READ = 64 * 2**20  # bytes of one node's log read
MAX_LOG_OUTPUT = 12 * 2**20  # bytes of one node's window lines sent back
MAX_CMD_CHARS = 4096  # of one recorded command line (and of its cwd)
MAX_COMMANDS = 10_000  # commands recorded from the nodes' logs per trial
MAX_CAPTURED_CHARS = 4 * 2**20  # of their command lines together, per trial
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


def _exec_of(parts: list[str], lines: list[str], size: int) -> LoggedExec | None:
    """The exec of a record's fields and its continuation lines (`size` characters in
    all, of which `lines` hold at least the first `MAX_CMD_CHARS`)."""
    cmd = "\n".join([parts[8], *lines]) if lines else parts[8]
    if size > MAX_CMD_CHARS:
        cmd = cmd[:MAX_CMD_CHARS] + CUT_NOTE.format(n=size - MAX_CMD_CHARS)
    try:
        return LoggedExec(ts=int(parts[1]) + int(parts[2]) / 1e6, pid=int(parts[3]),
                          ppid=int(parts[4]), uid=int(parts[5]), marker=parts[6][:64],
                          cwd=cut(parts[7], MAX_CMD_CHARS) or "", cmd=cmd)
    except ValueError:  # not numbers (also: more digits than int() takes)
        return None


def parse_log(text: str) -> list[LoggedExec]:
    """The execs of a log text; malformed lines (and their continuations) are skipped.

    Linear in the text: a command's continuation lines are collected (only as many as its
    cut command line shows), then joined once."""
    out: list[LoggedExec] = []
    parts: list[str] | None = None
    lines: list[str] = []
    size = 0
    for line in text.rstrip("\n").split("\n"):
        if line.startswith(PREFIX):
            if parts is not None and (ex := _exec_of(parts, lines, size)) is not None:
                out.append(ex)
            parts, lines = line.split("\t", 8), []
            if len(parts) != 9:
                parts = None
                continue
            size = len(parts[8])
        elif parts is not None:
            if size <= MAX_CMD_CHARS:
                lines.append(line)
            size += len(line) + 1
    if parts is not None and (ex := _exec_of(parts, lines, size)) is not None:
        out.append(ex)
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


def _joined(ws: tuple[str, ...]) -> str:
    return f" {' '.join(ws)} "


def _within(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    return _joined(part) in _joined(whole)


def attribute(execs: Sequence[LoggedExec], recorded: Iterable[str],
              unattributed: bool = False, limit: int | None = None
              ) -> list[tuple[LoggedExec, str]]:
    """(exec, source) for the execs the trajectory does not already show (module doc), the
    earliest `limit` of them."""
    return _attribute(execs, recorded, unattributed, limit)[0]


def _attribute(execs: Sequence[LoggedExec], recorded: Iterable[str], unattributed: bool,
               limit: int | None) -> tuple[list[tuple[LoggedExec, str]], int]:
    """`attribute`, and how many execs (the latest) were not looked at once `limit` were
    kept. Linear: every recorded command's words are one line of a single text, so "within
    some recorded command" is one substring search (a word holds no newline), and each
    pid's last command line is split into words once."""
    recorded_text = "\n".join(_joined(words(c)) for c in recorded)
    last_by_pid: dict[int, str] = {}
    kept: list[tuple[LoggedExec, str]] = []
    ordered = sorted(execs, key=lambda e: e.ts)
    for i, ex in enumerate(ordered):
        if limit is not None and len(kept) >= limit:
            return kept, len(ordered) - i
        all_words = words(ex.cmd)
        before = (last_by_pid.get(ex.pid), last_by_pid.get(ex.ppid))
        last_by_pid[ex.pid] = _joined(all_words)
        if ex.marker == HARNESS_MARK or (ex.marker == UNSET and not unattributed):
            continue
        ws = unwrap(all_words)
        if not ws:
            continue
        key = _joined(ws)
        if key in recorded_text or any(p is not None and key in p for p in before):
            continue
        source = "logger" if ex.marker == UNSET else CHILD_SOURCE.get(ex.marker, ex.marker)
        kept.append((ex, source))
    return kept, 0


def _epoch(ts: str) -> float:
    dt = datetime.fromisoformat(ts)
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def read_command(since: float, until: float, log_file: str = LOG_FILE,
                 max_read: int = MAX_LOG_READ, max_output: int = MAX_LOG_OUTPUT) -> str:
    """The node-side shell line: a `SIZE_MARK` line with the log's size, then the log's
    entries of [since, until] (whole seconds, padded) without the harness's own, taken
    from its first `max_read` bytes, at most `max_output` bytes of them (then a `CUT_MARK`
    line; `head -c` bounds it whatever awk does); `NO_LOG` when the node has no log."""
    program = (r'BEGIN { FS = "\t" } /^hxcmd\t/ { keep = ($2 >= s && $2 <= u && $7 != m) } '
               r"keep { n += length($0) + 1; if (n > c) { print x; exit } print }")
    f = shlex.quote(log_file)
    return (f"[ -r {f} ] || {{ echo {NO_LOG}; exit 0; }}; "
            f'echo "{SIZE_MARK} $(stat -c %s {f} 2>/dev/null || echo -1)"; '
            f"head -c {max_read} {f} | "
            f"awk -v s={math.floor(since) - 1} -v u={math.ceil(until) + 1} "
            f"-v m={HARNESS_MARK} -v c={max_output} -v x={CUT_MARK} {shlex.quote(program)} | "
            f"head -c {max_output + 2**16}")


@dataclass
class NodeLog:
    """What a node answered: the window's log lines and what was cut on the way."""

    text: str
    size: int | None = None  # of the whole log, bytes (None: not said)
    cut: bool = False  # the window's lines did not fit in `MAX_LOG_OUTPUT`

    @classmethod
    def parse(cls, stdout: str, max_output: int = MAX_LOG_OUTPUT) -> NodeLog:
        size = None
        first, sep, rest = stdout.partition("\n")
        if first.startswith(SIZE_MARK):
            try:
                size = int(first[len(SIZE_MARK):].strip())
            except ValueError:
                pass
            stdout = rest if sep else ""
        body = stdout.rstrip("\n")
        cut = body.endswith(CUT_MARK) or len(stdout) > max_output
        if body.endswith(CUT_MARK):
            stdout = body[:-len(CUT_MARK)]
        return cls(stdout, size, cut)


@dataclass
class _Cuts:
    """What the caps left out, for the truncation note."""

    notes: list[str] = field(default_factory=list)
    nodes: set[str] = field(default_factory=set)
    dropped: int = 0  # log entries of the window not recorded

    def add(self, node: str, note: str | None = None, dropped: int = 0) -> None:
        self.nodes.add(node)
        self.dropped += dropped
        if note:
            self.notes.append(f"{node}: {note}")

    def record(self, ts: str) -> CommandRecord | None:
        if not self.nodes:
            return None
        parts = ([f"{self.dropped} log entries of the window not recorded (at most "
                  f"{MAX_COMMANDS} commands and {MAX_CAPTURED_CHARS} characters of them per "
                  "trial)"] if self.dropped else []) + self.notes
        return truncation_note(ts, ",".join(sorted(self.nodes)), "; ".join(parts))


def _cap_trial(found: list[CommandRecord], cuts: _Cuts) -> list[CommandRecord]:
    """The earliest records within `MAX_COMMANDS` and `MAX_CAPTURED_CHARS`."""
    total = 0
    for i, rec in enumerate(found):
        total += len(rec.cmd) + len(rec.cwd or "")
        if i >= MAX_COMMANDS or total > MAX_CAPTURED_CHARS:
            for node in {r.node for r in found[i:]}:
                cuts.add(node)
            cuts.dropped += len(found) - i
            return found[:i]
    return found


async def collect_commands(env, since_ts: str, until_ts: str, *, unattributed: bool = False,
                           timeout: float = 60) -> list[CommandRecord]:
    """The commands the agent's processes ran on any node between the two ISO times.

    Nodes without a command log (snoopy missing) contribute nothing. Records are sorted by
    time and carry pid, ppid, uid and cwd; exit status and output are unknown (None). When
    a cap cut anything (module doc), a `truncation_note` record comes last.
    """
    since, until = _epoch(since_ts), _epoch(until_ts)
    try:
        recorded = read_trajectory(env.paths.trajectory)
    except Exception:  # no trajectory yet: nothing recorded to deduplicate against
        recorded = []
    found: list[CommandRecord] = []
    cuts = _Cuts()
    for node in env.nodes:
        cmd = read_command(since, until, max_read=MAX_LOG_READ, max_output=MAX_LOG_OUTPUT)
        res = await env.substrate.exec(node, cmd, timeout, env={"HARNESS_SOURCE": HARNESS_MARK})
        if NO_LOG in res.stdout[:64] or res.exit_code != 0:
            continue
        log = NodeLog.parse(res.stdout, MAX_LOG_OUTPUT)
        if log.size is not None and log.size > MAX_LOG_READ:
            cuts.add(node.name, f"log of {log.size} bytes, only its first {MAX_LOG_READ} read")
        if log.cut:
            cuts.add(node.name, f"the window's log lines cut at {MAX_LOG_OUTPUT} bytes, the "
                                "rest not read")
        execs = [e for e in parse_log(log.text) if since <= e.ts <= until]
        del log
        mine = [r.cmd for r in recorded if r.node == node.name and not r.is_note]
        kept, unexamined = _attribute(execs, mine, unattributed, MAX_COMMANDS)
        if unexamined:
            cuts.add(node.name, dropped=unexamined)
        for ex, source in kept:
            found.append(CommandRecord(
                ts=_iso(ex.ts), node=node.name, cmd=env.redact(ex.cmd) or "", source=source,
                pid=ex.pid, ppid=ex.ppid, uid=ex.uid, cwd=env.redact(ex.cwd)))
    found = _cap_trial(sorted(found, key=lambda r: r.ts), cuts)
    note = cuts.record(_iso(until))
    return [*found, note] if note else found


async def capture_window(env, since_ts: str, until_ts: str, **kw) -> list[CommandRecord]:
    """`collect_commands`, then append the records to the trial's trajectory (one write)."""
    records = await collect_commands(env, since_ts, until_ts, **kw)
    append_records(env.paths.trajectory, records)
    return records
