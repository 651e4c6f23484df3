"""Shell-aware splitting of a recorded command line into simple commands (segments).

The risk rules look at one simple command at a time. `segments()` tokenizes like a POSIX
shell (quotes, escapes, `;` `&&` `||` `|` `&` newlines and subshells, redirects, heredocs,
`$(...)` and backticks), then strips what only wraps the real program:

- leading `VAR=value` assignments, `sudo`, `env`, `nohup`, `timeout 5`, `nice`, `xargs`...;
- a leading path (`/usr/bin/rm` is `rm`);
- `bash -c '...'`, `sh -c`, `su -c`, `eval`, `ssh HOST CMD`, `docker exec C CMD`, which are
  parsed again (to a bounded depth);
- `service X stop`, `/etc/init.d/X stop` and `invoke-rc.d X stop`, which become
  `systemctl stop X`.

Heredoc bodies and here-strings are kept as the segment's `body`; `cd DIR` moves the
working directory that resolves relative operands of the segments after it; `NAME=value`
assignments are substituted into later `$NAME` / `${NAME}` words.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

SUBST = "$(...)"
_SEPARATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "\n", "(", ")")
_REDIRECTS = ("&>>", "&>", "<<<", "<<-", "<<", ">>", ">&", "<&", ">|", "<>", ">", "<")
_OVERWRITE = (">", ">|", "&>")
_DUPS = (">&", "<&")
_ASSIGN = re.compile(r"^[A-Za-z_]\w*=")
_VAR = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")
_MAX_DEPTH = 6

_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    name: (frozenset(opts.split()), positional) for name, opts, positional in (
        ("sudo", "-u -g -h -p -C -D -R -T -U -r -t --user --group --host --prompt", 0),
        ("doas", "-u -C", 0),
        ("env", "-u -C -S --unset --chdir --split-string", 0),
        ("nohup", "", 0), ("time", "-f -o", 0), ("command", "", 0), ("builtin", "", 0),
        ("exec", "-a", 0), ("nice", "-n --adjustment", 0), ("ionice", "-c -n -p", 0),
        ("stdbuf", "-i -o -e", 0), ("setsid", "", 0), ("unbuffer", "", 0),
        ("timeout", "-s -k --signal --kill-after", 1), ("chroot", "--userspec", 1),
        ("nsenter", "-t -S -G --target -n -m -p -u -i", 0), ("taskset", "", 1),
        ("xargs", "-I -n -P -d -E -L -s -a --max-args --delimiter --arg-file", 0),
        ("watch", "-n -d --interval", 0), ("runuser", "-u -g -G --user --group", 0),
        ("strace", "-o -e -p -s", 0), ("flock", "-w -E", 1),
    )
}
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
_SSH_ARG_OPTS = frozenset("-" + c for c in "BbcDEeFIiJLlmOopQRSWw")
_EXEC_ARG_OPTS = frozenset("-e --env -u --user -w --workdir --env-file --detach-keys -c "
                           "--container -n --namespace".split())
_KEYWORDS = frozenset("{ } ! if then else elif fi do done while until".split())
_INIT_SCRIPTS = ("/etc/init.d/", "/etc/rc.d/init.d/")


@dataclass(frozen=True)
class Segment:
    """One simple command: program basename, arguments, redirects, stdin body, cwd."""

    argv: tuple[str, ...]
    redirects: tuple[tuple[str, str], ...] = ()
    body: str = ""
    cwd: str | None = None

    @property
    def prog(self) -> str:
        return self.argv[0] if self.argv else ""

    @property
    def args(self) -> tuple[str, ...]:
        return self.argv[1:]

    @property
    def text(self) -> str:
        """Arguments, redirects and heredoc body as one string, for regex rules."""
        parts = [" ".join(self.args), *(f"{op} {t}" for op, t in self.redirects)]
        return " ".join(p for p in parts if p) + (f"\n{self.body}" if self.body else "")

    def resolve(self, word: str) -> str:
        """A path operand made absolute against `cwd` when both allow it, normalized."""
        if not word or " " in word or word.startswith(("$", "~")):
            return word
        if not word.startswith("/") and self.cwd:
            word = posixpath.join(self.cwd, word)
        trail = "/*" if word.endswith("/*") else ""
        norm = posixpath.normpath(word[: -2] if trail else word)
        return norm.rstrip("/") + trail if trail else norm

    def operands(self) -> list[str]:
        """Non-option arguments, resolved; everything after `--` counts."""
        out, done = [], False
        for arg in self.args:
            if arg == "--" and not done:
                done = True
            elif done or not arg.startswith("-") or arg == "-":
                out.append(self.resolve(arg))
        return out

    def outputs(self) -> list[str]:
        """Targets of overwriting redirects (`>`, `>|`, `&>`), resolved."""
        return [self.resolve(t) for op, t in self.redirects if op in _OVERWRITE]


def tokenize(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Shell tokens as (kind, value), kind in word/sep/redir/body; and substitution texts."""
    toks: list[tuple[str, str]] = []
    subs: list[str] = []
    pending: list[tuple[int, str, bool]] = []
    word: list[str] = []
    started = quoted = False
    i, n = 0, len(text)

    def flush() -> None:
        nonlocal word, started, quoted
        if started:
            toks.append(("word", "".join(word)))
        word, started, quoted = [], False, False

    while i < n:
        c = text[i]
        if c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            word.append(text[i + 1:j])
            started = quoted = True
            i = j + 1
        elif c == '"':
            i = _double_quoted(text, i + 1, word, subs)
            started = quoted = True
        elif c == "\\":
            if text.startswith("\\\n", i):
                i += 2
                continue
            word.append(text[i + 1:i + 2])
            started = quoted = True
            i += 2
        elif text.startswith(("$(", "<(", ">("), i):
            j = _close_paren(text, i + 1)
            subs.append(text[i + 2:j])
            word.append(SUBST)
            started = True
            i = j + 1
        elif c == "`":
            j = text.find("`", i + 1)
            j = n if j < 0 else j
            subs.append(text[i + 1:j])
            word.append(SUBST)
            started = True
            i = j + 1
        elif c in " \t\r":
            flush()
            i += 1
        elif c == "#" and not started:
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "<>" or text.startswith("&>", i):
            if started and not quoted and "".join(word).isdigit():
                word, started = [], False
            flush()
            op = next(o for o in _REDIRECTS if text.startswith(o, i))
            toks.append(("redir", op))
            i += len(op)
            if op in ("<<", "<<-"):
                m = re.compile(r"[ \t]*(['\"]?)([^\s'\";&|<>()]+)\1").match(text, i)
                if m:
                    pending.append((len(toks), m.group(2), op == "<<-"))
                    toks.append(("body", ""))
                    i = m.end()
        elif c in ";&|\n()":
            flush()
            op = next(o for o in _SEPARATORS if text.startswith(o, i))
            toks.append(("sep", op))
            i += len(op)
            if op == "\n" and pending:
                i = _read_heredocs(text, i, pending, toks)
        else:
            word.append(c)
            started = True
            i += 1
    flush()
    return toks, subs


def _double_quoted(text: str, i: int, word: list[str], subs: list[str]) -> int:
    """Append a double-quoted string's value to `word`; return the index after it."""
    n = len(text)
    while i < n and text[i] != '"':
        if text[i] == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
            word.append(text[i + 1] if text[i + 1] != "\n" else "")
            i += 2
        elif text.startswith("$(", i):
            j = _close_paren(text, i + 1)
            subs.append(text[i + 2:j])
            word.append(SUBST)
            i = j + 1
        else:
            word.append(text[i])
            i += 1
    return i + 1


def _close_paren(text: str, i: int) -> int:
    """Index of the parenthesis closing the one at `i` (or the end of the text)."""
    depth = 0
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j
    return len(text)


def _read_heredocs(text: str, i: int, pending: list, toks: list) -> int:
    """Consume the bodies of pending heredocs after a newline; store them in `toks`."""
    lines = text[i:].split("\n")
    used = 0
    for slot, delim, strip_tabs in pending:
        body = []
        while used < len(lines):
            line = lines[used]
            used += 1
            if (line.lstrip("\t") if strip_tabs else line) == delim:
                break
            body.append(line)
        toks[slot] = ("body", "\n".join(body))
    pending.clear()
    return min(len(text), i + sum(len(line) + 1 for line in lines[:used]))


def segments(cmd: str, cwd: str | None = None, _depth: int = 0) -> list[Segment]:
    """Every simple command in `cmd`, wrappers stripped, nested shells parsed."""
    toks, subs = tokenize(cmd)
    out: list[Segment] = []
    env: dict[str, str] = {}
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    body: list[str] = []
    for k, (kind, value) in enumerate([*toks, ("sep", ";")]):
        if kind == "word" and not (k and toks[k - 1][0] == "redir"):
            words.append(_expand(value, env))
        elif kind == "redir" and k + 1 < len(toks):
            nkind, nval = toks[k + 1]
            if nkind == "body" or value == "<<<":
                body.append(nval)
            elif nkind == "word" and not (value in _DUPS and (nval.isdigit() or nval == "-")):
                redirects.append((value, _expand(nval, env)))
        elif kind == "sep":
            if words and all(_ASSIGN.match(w) for w in words) and not redirects:
                env.update(w.split("=", 1) for w in words)
            elif words or redirects:
                found = _simple(words, tuple(redirects), "\n".join(body), cwd, _depth)
                out.extend(found)
                cwd = _after_cd(found, cwd)
            words, redirects, body = [], [], []
    if _depth < _MAX_DEPTH:
        for sub in subs:
            out.extend(segments(sub, cwd, _depth + 1))
    return out


def _expand(word: str, env: dict[str, str]) -> str:
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), word) if "$" in word else word


def _after_cd(found: list[Segment], cwd: str | None) -> str | None:
    """The working directory after a `cd`/`pushd` segment (unknown if not resolvable)."""
    for seg in found:
        if seg.prog in ("cd", "pushd"):
            ops = seg.operands()
            target = ops[0] if ops else ""
            cwd = target if target.startswith("/") else None
    return cwd


def _simple(words: list[str], redirects: tuple, body: str, cwd: str | None,
            depth: int) -> list[Segment]:
    """Unwrap one simple command into one segment, or re-parse what it wraps."""
    argv = list(words)
    if argv and argv[0] in ("for", "case", "select", "function"):
        return []
    while argv and (_ASSIGN.match(argv[0]) or argv[0] in _KEYWORDS):
        argv.pop(0)
    while argv:
        prog = argv[0]
        if prog.startswith(_INIT_SCRIPTS):
            argv = ["systemctl", *argv[1:2], posixpath.basename(prog), *argv[2:]]
            break
        prog = posixpath.basename(prog) if "/" in prog else prog
        argv[0] = prog
        rest = argv[1:]
        if prog in _WRAPPERS:
            argv = _strip_options(rest, *_WRAPPERS[prog])
            while argv and _ASSIGN.match(argv[0]):
                argv.pop(0)
            continue
        inner = _nested_text(prog, rest)
        if inner is not None:
            return segments(inner, cwd, depth + 1) if depth < _MAX_DEPTH else []
        if prog in ("docker", "podman", "kubectl", "lxc") and rest[:1] == ["exec"]:
            argv = _strip_options(rest[1:], _EXEC_ARG_OPTS, 1)
            continue
        if prog in ("service", "invoke-rc.d", "rc-service") and len(rest) >= 2:
            argv = ["systemctl", rest[1], rest[0], *rest[2:]]
        break
    return [Segment(tuple(argv), redirects, body, cwd)] if argv or redirects else []


def _strip_options(args: list[str], takes_value: frozenset[str], positional: int) -> list[str]:
    """Drop a wrapper's options (and their values) and `positional` leading operands."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            i += 1
            break
        i += 2 if args[i] in takes_value else 1
    rest = args[i + positional:]
    return rest[1:] if rest[:1] == ["--"] else rest


def _nested_text(prog: str, rest: list[str]) -> str | None:
    """The command text a shell, `su -c`, `eval` or `ssh` would run, if any."""
    if prog in _SHELLS or prog == "su":
        for k, arg in enumerate(rest):
            if re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*|--command", arg) and k + 1 < len(rest):
                return rest[k + 1]
        return None
    if prog == "eval":
        return " ".join(rest)
    if prog == "ssh":
        remote = _strip_options(rest, _SSH_ARG_OPTS, 1)
        return " ".join(remote) if remote else None
    return None
