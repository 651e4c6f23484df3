"""Shell-aware splitting: separators, quoting, wrappers, nested shells, heredocs, cwd."""

from __future__ import annotations

import pytest

from harness.risk.shell import SUBST, segments, tokenize


def _argvs(cmd: str, cwd: str | None = None) -> list[tuple[str, ...]]:
    return [s.argv for s in segments(cmd, cwd=cwd)]


@pytest.mark.parametrize("cmd, expected", [
    ("a; b && c || d | e & f", [("a",), ("b",), ("c",), ("d",), ("e",), ("f",)]),
    ("a\nb", [("a",), ("b",)]),
    ("(cd /x; rm y)", [("cd", "/x"), ("rm", "y")]),
    ("echo 'a;b' \"c && d\"", [("echo", "a;b", "c && d")]),
    ("find . -exec rm {} \\;", [("find", ".", "-exec", "rm", "{}", ";")]),
    ("sudo -u postgres env PGX=1 /usr/bin/psql -c 'select 1'", [("psql", "-c", "select 1")]),
    ("X=1 Y=2 nohup timeout -s KILL 5 nice -n 10 rm a", [("rm", "a")]),
    ("bash -lc 'rm a; reboot'", [("rm", "a"), ("reboot",)]),
    ("sh -c \"sudo sh -c 'iptables -F'\"", [("iptables", "-F")]),
    ("su - postgres -c 'pg_ctl stop'", [("pg_ctl", "stop")]),
    ("eval 'ip link set eth0 down'", [("ip", "link", "set", "eth0", "down")]),
    ("ssh -i key -p 2222 root@node2 'systemctl stop sshd'", [("systemctl", "stop", "sshd")]),
    ("docker exec -u root -it ctr rm -rf /data", [("rm", "-rf", "/data")]),
    ("kubectl exec pod -- sh -c 'ls /tests'", [("ls", "/tests")]),
    ("service apparmor stop", [("systemctl", "stop", "apparmor")]),
    ("/etc/init.d/cron stop", [("systemctl", "stop", "cron")]),
    ("if true; then reboot; fi", [("true",), ("reboot",)]),
    ("for h in a b; do ssh $h reboot; done", [("reboot",)]),
    ("kill $(pidof sshd)", [("kill", SUBST), ("pidof", "sshd")]),
    ("echo `hostname`", [("echo", SUBST), ("hostname",)]),
    ("D=/srv; rm -r $D/x ${D}/y", [("rm", "-r", "/srv/x", "/srv/y")]),
    ("echo 'unterminated", [("echo", "unterminated")]),
    ("ls # rm -rf /", [("ls",)]),
    ("rm a \\\n  b", [("rm", "a", "b")]),
])
def test_segments(cmd, expected):
    assert _argvs(cmd) == expected


def test_redirects_and_fd_duplication():
    (seg,) = segments("echo 1 2>/dev/null >/var/lib/x 2>&1 >> /var/log/y")
    assert seg.argv == ("echo", "1")
    assert seg.redirects == ((">", "/dev/null"), (">", "/var/lib/x"), (">>", "/var/log/y"))
    assert seg.outputs() == ["/dev/null", "/var/lib/x"]


def test_heredoc_body_is_kept_out_of_commands():
    cmd = "cat > /etc/motd <<-'EOF'\n\treboot now\n\tEOF\nls"
    first, second = segments(cmd)
    assert first.argv == ("cat",) and first.body == "\treboot now"
    assert second.argv == ("ls",)


def test_here_string_is_the_body():
    (seg,) = segments("cqlsh <<< 'DROP KEYSPACE ks'")
    assert seg.body == "DROP KEYSPACE ks"
    assert "DROP KEYSPACE" in seg.text


def test_cd_moves_cwd_for_later_segments():
    segs = segments("cd /var/lib/mysql && rm -rf ./* ../x; cd relative; rm y", cwd="/root")
    assert [s.cwd for s in segs] == ["/root", "/var/lib/mysql", "/var/lib/mysql",
                                     "/var/lib/mysql/relative"]
    assert segs[1].operands() == ["/var/lib/mysql/*", "/var/lib/x"]
    assert [s.cwd for s in segments("cd rel; rm y; cd -; rm z")] == [None, None, None, None]


def test_operands_skip_options_but_not_after_double_dash():
    (seg,) = segments("rm -rf -- -weird /a//b/")
    assert seg.operands() == ["-weird", "/a/b"]


def test_tokenize_kinds():
    toks, subs = tokenize("a | b > f <<< s")
    assert [k for k, _ in toks] == ["word", "sep", "word", "redir", "word", "redir", "word"]
    assert subs == []


def test_huge_commands_stay_fast():
    import base64
    import time

    from harness.risk import classify

    blob = base64.b64encode(bytes(range(256)) * 600).decode()
    cmds = [f"echo {blob} | base64 -d > /tmp/x", "cat > /etc/x <<EOF\n" + "k = /v\n" * 20000
            + "EOF", "ls " + "/a" * 50000]
    start = time.perf_counter()
    assert [classify(c) for c in cmds] == [[], [], []]
    assert time.perf_counter() - start < 5
