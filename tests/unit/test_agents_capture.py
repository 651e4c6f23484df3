"""Command capture: the log format the role writes, parsing and attribution."""

from __future__ import annotations

import shlex
from pathlib import Path

import jinja2
import yaml

from harness.trial.capture import (
    LOG_FILE,
    PREFIX,
    attribute,
    parse_log,
    read_command,
    unwrap,
    words,
)

ROLE = Path(__file__).resolve().parents[2] / "roles" / "harness_node"

LOG = """\
a line without the prefix before any record
hxcmd\t1700000000\t100\t26\t0\t0\tagent\t/\ttimeout -k 5 30 bash -c cd /tmp && ls; bash /tmp/s.sh
hxcmd\t1700000000\t200\t33\t32\t0\tagent\t/tmp\tls
hxcmd\t1700000000\t300\t32\t26\t0\tagent\t/tmp\tbash /tmp/s.sh
hxcmd\t1700000000\t400\t34\t32\t0\tagent\t/tmp\trm -rf /var/lib/mysql/x
hxcmd\t1700000001\t000500\t40\t0\t0\tharness\t/\tbash /tests/test.sh
hxcmd\t1700000001\t600\t41\t1\t0\t(undefined)\t/\t/usr/sbin/cron -f
hxcmd\t1700000001\t700\t42\t32\t1000\tagent\t/home/u\tbash -c echo "multi
line" done
hxcmd\tbad\t1\t2\t3\t4\tagent\t/\tx
continuation of a malformed line
"""
RECORDED = ["cd /tmp && ls; bash /tmp/s.sh"]


def test_role_writes_the_format_capture_parses():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["harness_node_command_log_file"] == LOG_FILE
    env = jinja2.Environment()
    env.filters.update(quote=shlex.quote, bool=bool)
    script = env.from_string((ROLE / "templates" / "enable-snoopy.sh.j2").read_text()
                             ).render(**defaults)
    line = next(ln for ln in script.splitlines() if ln.startswith("message_format"))
    fields = line.split('"')[1].split("\t")
    assert fields[0] + "\t" == PREFIX
    assert fields[1:] == ["%{timestamp}", "%{timestamp_us}", "%{pid}", "%{ppid}", "%{uid}",
                          "%{env:HARNESS_SOURCE}", "%{cwd}", "%{cmdline}"]
    assert f"output = file:{LOG_FILE}" in script
    assert script.index("/etc/snoopy.ini") < script.index("/etc/ld.so.preload")


def test_parse_log_joins_continuations_and_skips_garbage():
    execs = parse_log(LOG)
    assert len(execs) == 7
    assert execs[4].ts == 1700000001.0005 and execs[4].marker == "harness"
    assert execs[6].cmd == 'bash -c echo "multi\nline" done' and execs[6].uid == 1000


def test_attribute_keeps_only_what_the_trajectory_does_not_show():
    kept = attribute(parse_log(LOG), RECORDED)
    assert [(e.cmd, s) for e, s in kept] == [
        ("rm -rf /var/lib/mysql/x", "agent-child"),
        ('bash -c echo "multi\nline" done', "agent-child")]
    with_unmarked = attribute(parse_log(LOG), RECORDED, unattributed=True)
    assert ("/usr/sbin/cron -f", "logger") in [(e.cmd, s) for e, s in with_unmarked]


def test_children_already_on_their_parents_command_line_are_dropped():
    log = ("hxcmd\t1\t0\t50\t10\t0\tagent\t/\tbash -c sudo rm -rf /srv/x\n"
           "hxcmd\t1\t1\t50\t10\t0\tagent\t/\tsudo rm -rf /srv/x\n"
           "hxcmd\t1\t2\t51\t50\t0\tagent\t/\trm -rf /srv/x\n"
           "hxcmd\t1\t3\t52\t0\t0\toracle\t/\tbash solve.sh\n")
    kept = attribute(parse_log(log), [])
    assert [(e.cmd, s) for e, s in kept] == [("bash -c sudo rm -rf /srv/x", "agent-child"),
                                            ("bash solve.sh", "oracle")]


def test_unwrap_and_words():
    assert unwrap(words("timeout -k 5 30 bash -c 'ls -l'")) == ("ls", "-l")
    assert unwrap(words("bash -lc 'x'")) == ("x",)
    assert unwrap(words("bash script.sh")) == ("bash", "script.sh")
    assert words("echo 'a b' | grep -q \"c\"") == ("echo", "a", "b", "grep", "-q", "c")


def test_read_command_filters_on_the_node():
    cmd = read_command(1700000000.5, 1700000002.2)
    assert "-v s=1699999999 -v u=1700000004" in cmd and "-v m=harness" in cmd
    assert LOG_FILE in cmd
