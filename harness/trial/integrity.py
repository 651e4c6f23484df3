"""Verifier integrity: what the agent left behind is stopped, and tampering is found.

The agent is root on its nodes and hostile. Before a verifier runs, on every node:

1. **A toolbox** arrives: the host's static busybox with its applets, in a new directory
   of unpredictable name (`/.hx-tb-<random>`), through the substrate's own channel (docker:
   the engine writes it into the container; VM: SSH). The verifier's command line runs on
   it (`Substrate.exec(toolbox=...)`), not on the node's shell; test.sh itself runs on
   the node's own programs once step 3 has found them unchanged (and step 3 runs again
   right after test.sh, in the same shell: `changed_during`). The baseline taken before
   the window, when the node is still the harness's, gets its toolbox unpacked by the
   node's own tar in the same round trip.
2. **Leftovers are stopped**: every process that is not PID 1, not a kernel thread and not
   in a systemd service with a unit file on disk (the task's daemons) is killed: the
   agent's shells and background loops (in the container's root cgroup, session scopes, or
   an `ssh.service` without logind), and transient units it made with `systemd-run`
   (fault units of the harness, listed in the node's fault ledger, are kept). A transient
   unit gets a stop job without waiting for it (systemd in a container on cgroup v1 may
   miss the end of a process it did not watch and wait out its stop timeout); its
   processes are killed here like the others, and the job keeps it from restarting. What
   was killed goes to events.jsonl.
3. **Tampering is looked for** where a verifier trusts the node: every file directly in
   the system's command and library directories and the loader's files
   (`/etc/ld.so.preload`: size, mtime, ctime, inode, mode, owner), on VMs also the sha256
   of the shells, interpreters, loader and libc (`hashes_needed`), and commands added to
   /usr/local that shadow system ones; against a manifest the toolbox
   took when the window opened (after the harness's own setup, e.g. snoopy's preload),
   kept in the trial dir. A container cannot set the clock, so a replaced file always gets
   a new ctime; a root agent controls a VM's kernel, so there this finds replaced or
   shadowed binaries, not a rootkit (README, threat model). The interpreters' library
   trees (`TREE_DIRS`: Python's and Perl's) are listed recursively, and an addition there
   counts where it would run in every interpreter (`classify_changes`). A node that is
   powered off when the window opens (a task may start with one down) has no baseline: its
   leftovers are stopped, its files not compared; a node powered off at verification time
   is skipped (events.jsonl).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import secrets
import shlex
import shutil
import tarfile
import time
from pathlib import Path

from harness.errors import PreflightError
from harness.substrates.common import toolbox_argv

BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
APPLETS = (
    "sh", "ash", "timeout", "unshare", "mount", "umount", "tar", "cat", "grep", "egrep",
    "fgrep", "sed", "awk", "head", "tail", "wc", "cut", "tr", "sort", "uniq", "ls", "stat",
    "test", "[", "echo", "printf", "sleep", "env", "find", "xargs", "mkdir", "rm", "cp", "mv",
    "touch", "chmod", "id", "basename", "dirname", "readlink", "realpath", "sha256sum",
    "md5sum", "base64", "seq", "tee", "true", "false", "kill", "expr", "od", "date",
)
SYSTEM_DIRS = ("/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/lib/", "/lib32/", "/lib64/",
               "/libx32/", "/usr/lib/", "/usr/lib32/", "/usr/lib64/", "/usr/libexec/")
LOADER_FILES = ("/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.cache")
# The interpreters' library trees, listed recursively (every file, `__pycache__` excepted:
# the verifier's Python reads no cached bytecode, `VERIFIER_ENV`). A change to a file the
# image had is tampering; so is an addition, except in the local trees (/usr/local: what
# `pip install` adds), where only a `.pth`, a `sitecustomize`/`usercustomize` or a module
# that shadows one of the image's is.
TREE_DIRS = ("/usr/lib/python3*", "/usr/local/lib/python3*", "/etc/python3*",
             "/usr/share/perl5", "/usr/share/perl", "/usr/lib/x86_64-linux-gnu/perl*",
             "/etc/perl")
TREE_PREFIXES = ("/usr/local/lib/python3", "/etc/python3", "/etc/perl/")
PY_MODULE = re.compile(r"^/usr(?:/local)?/lib/python3(?:\.\d+)?/"
                       r"(?:(?:dist|site)-packages/|lib-dynload/)?([^/]+)")
PY_HOOKS = ("sitecustomize", "usercustomize")
# test.sh's environment: no cached bytecode is read (a planted .pyc whose header matches its
# source would run), no user site (root's ~/.local), no startup or path variables
VERIFIER_ENV = {"PYTHONPYCACHEPREFIX": "/logs/.hx-pycache", "PYTHONNOUSERSITE": "1",
                "PYTHONDONTWRITEBYTECODE": "1"}
BOOT_WAIT_SEC = 180  # how long a node that is on may take to answer (booting) at a check
SHADOW_DIRS = ("/usr/local/bin/", "/usr/local/sbin/")
IGNORED = ("__pycache__", ".pyc")
# VM manifest: every file of these directories (not recursive below them), and the sha256
# of the programs a verifier script runs through
MANIFEST_DIRS = ("/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin",
                 "/usr/local/sbin", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/libexec",
                 "/etc/ld.so.conf.d")
HASHED = ("/usr/bin/bash", "/usr/bin/dash", "/usr/bin/env", "/lib64/ld-linux-x86-64.so.2",
          "/lib/x86_64-linux-gnu/libc.so.6", "/etc/ld.so.preload", "/etc/ld.so.conf")


def busybox() -> Path:
    for c in BUSYBOX_CANDIDATES:
        p = Path(c)
        if p.is_file() and b"BusyBox" in p.read_bytes()[:4_000_000]:
            return p
    raise PreflightError("static busybox not found (the verifier's toolbox): "
                         "apt-get install busybox-static, or run scripts/setup.sh")


_TOOLBOX: dict[str, bytes] = {}


def toolbox_tar(top: str) -> bytes:
    """A tar of `top`/bin/busybox and its applets (root-owned, read-only modes)."""
    bb = busybox().read_bytes()
    name = top.strip("/")
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in (name, f"{name}/bin"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o555, now
            tar.addfile(info)
        info = tarfile.TarInfo(f"{name}/bin/busybox")
        info.size, info.mode, info.mtime = len(bb), 0o555, now
        tar.addfile(info, io.BytesIO(bb))
        for applet in APPLETS:
            link = tarfile.TarInfo(f"{name}/bin/{applet}")
            link.type, link.linkname, link.mtime = tarfile.SYMTYPE, "busybox", now
            tar.addfile(link)
    return buf.getvalue()


def new_toolbox_path() -> str:
    return f"/.hx-tb-{secrets.token_hex(8)}"


async def install_toolbox(substrate, node) -> str:
    """Put a fresh toolbox on `node`; return its directory (programs in `<dir>/bin`)."""
    top = new_toolbox_path()
    await substrate.put_archive(node, toolbox_tar(top), "/")
    return top


LEFTOVERS_SH = r"""
ppid() {
  while read -r k v; do [ "$k" = PPid: ] && { echo "$v"; return; }; done < "/proc/$1/status"
  echo 0
}
self=$$; keep=" 1 $self "; p=$self; tbb=${PATH%%:*}/busybox
while [ "$p" -gt 1 ] 2>/dev/null; do p=$(ppid "$p" 2>/dev/null || echo 0); keep="$keep$p "; done
faults=""
for f in /run/harness/faults/*.json; do [ -f "$f" ] && faults="$faults ${f##*/}"; done
sshmain=$(systemctl show -p MainPID --value ssh.service 2>/dev/null || echo 0); stopped=" "
# leftovers: prints "pid cgroup" of every process to stop; stops transient units on the way
leftovers() {
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    case "$keep" in *" $pid "*) continue ;; esac
    [ -e "$d/exe" ] || continue
    if [ "$d/exe" -ef "$tbb" ]; then  # the toolbox's own: this script's subshells only
      q=$pid
      while [ "$q" -gt 1 ] 2>/dev/null; do
        q=$(ppid "$q" 2>/dev/null || echo 0); [ "$q" = "$self" ] && break
      done
      [ "$q" = "$self" ] && continue
    fi
    cg=""
    while IFS= read -r line; do
      case "$line" in
        *:name=systemd:*) cg=${line#*:name=systemd:} ;;
        0::*) [ -n "$cg" ] || cg=${line#0::} ;;
      esac
    done < "$d/cgroup" 2>/dev/null
    unit=""
    case "$cg" in
      /init.scope) continue ;;
      /system.slice/*) unit=${cg#/system.slice/}; unit=${unit%%/*} ;;
    esac
    if [ -n "$unit" ]; then
      if [ "$unit" = ssh.service ]; then
        [ "$pid" = "$sshmain" ] && continue
      elif [ ! -e "/run/systemd/transient/$unit" ]; then
        continue
      else
        fid=${unit#hx-deadman-}; fid=${fid#hx-}; fid=${fid%%-*}; fid=${fid%.*}
        case "$faults" in *" $fid.json"*) continue ;; esac
        case "$stopped" in *" $unit "*) ;; *)
          stopped="$stopped $unit "
          systemctl stop --no-block "$unit" >/dev/null 2>&1
          printf 'K {"unit": "%s", "cgroup": "%s"}\n' "$unit" "$cg" ;;
        esac
      fi
    fi
    echo "$pid $cg"
  done
}
# SIGSTOP first, in rounds (a stopped process forks no more: a fork bomb converges), then
# SIGKILL what was stopped
all=""
for round in 1 2 3 4 5 6; do
  found=$(leftovers)
  pids=$(echo "$found" | sed -n 's/^\([0-9][0-9]*\) .*/\1/p')
  [ -n "$pids" ] || break
  kill -STOP $pids 2>/dev/null
  all="$all
$found"
done
echo "$all" | sed -n 's/^K //p' | sed 's/^/K /'
echo "$all" | while read -r pid cg; do
  case "$pid" in ''|*[!0-9]*) continue ;; esac
  [ -e "/proc/$pid" ] || continue
  case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in  # an earlier toolbox's watchdog
    /.hx-tb-*) kill -9 "$pid" 2>/dev/null; continue ;;
  esac
  cmd=$( (tr '\0' ' ' < "/proc/$pid/cmdline") 2>/dev/null | head -c 200 | tr -d '"\\')
  kill -9 "$pid" 2>/dev/null &&
    printf 'K {"pid": %s, "cgroup": "%s", "cmd": "%s"}\n' "$pid" "$cg" "$cmd"
done
true
"""


def py_module(path: str) -> str | None:
    """The top-level Python module a file of a library tree belongs to (None elsewhere)."""
    m = PY_MODULE.match(path)
    return m.group(1).split(".", 1)[0] if m else None


def image_modules(files) -> set[str]:
    """The top-level Python modules of the image's own trees (stdlib, Debian's packages)."""
    return {py_module(p) for p in files if p.startswith("/usr/lib/python3")} - {None}


def classify_changes(changes: list[tuple[str, str]], shadowable: set[str] | None = None,
                     modules: set[str] = frozenset()) -> list[str]:
    """The tampering among a node's file changes (kind in M/A/D, path), as evidence lines;
    `shadowable`: the system's commands, `modules`: the image's Python modules."""
    found = []
    for kind, path in changes:
        if any(x in path for x in IGNORED):
            continue
        if path.startswith(SYSTEM_DIRS) or path in LOADER_FILES or \
                path.startswith(("/etc/ld.so.conf.d/", "/usr/share/perl")):
            found.append(f"{kind} {path}")
        elif path.startswith(TREE_PREFIXES):
            name = py_module(path)
            if kind != "A" or path.startswith("/etc/"):
                found.append(f"{kind} {path}")
            elif path.endswith(".pth") or name in PY_HOOKS:
                found.append(f"{kind} {path} (runs in every Python)")
            elif name is not None and name in modules:
                found.append(f"{kind} {path} (shadows the image's Python module {name})")
        elif kind == "A" and path.startswith(SHADOW_DIRS):
            name = path.rsplit("/", 1)[-1]
            if shadowable is None or name in shadowable:
                found.append(f"{kind} {path} (shadows a system command)")
    return found


MANIFEST_SH = r"""
# one find over all the directories, one over all the trees (not one of each per directory:
# every process costs a node under load), each name its own word (set --: a name with a
# space stays one); when one fails part way, each of its directories counts as cut short (X)
set --
for d in DIRS; do [ -d "$d" ] && set -- "$@" "$d"; done
[ $# -eq 0 ] || find "$@" -maxdepth 1 -mindepth 1 \( -type f -o -type l \) \
  -exec stat -c 'F %n|%s|%Y|%Z|%i|%a|%u' {} + || for d; do echo "X $d"; done
set --
for d in TREES; do [ -d "$d" ] && set -- "$@" "$d"; done
[ $# -eq 0 ] || find "$@" -name __pycache__ -prune -o \( -type f -o -type l \) \
  -exec stat -c 'F %n|%s|%Y|%Z|%i|%a|%u' {} + || for d; do echo "X $d"; done
for f in LOADERS; do [ -e "$f" ] && { stat -c 'F %n|%s|%Y|%Z|%i|%a|%u' "$f" || echo "X $f"; }; done
true
"""
HASHES_SH = r"""
for f in HASHED; do [ -e "$f" ] && sha256sum "$f" | sed 's/^/H /'; done
true
"""
COMMANDS_SH = r"""
for d in /usr/bin /usr/sbin /bin /sbin; do ls "$d" 2>/dev/null; done | sort -u | sed 's/^/S /'
"""


def manifest_script(commands: bool = False, hashes: bool = True) -> str:
    """The manifest: every listed file's size, times, inode, mode and owner; with `hashes`,
    the sha256 of the programs a verifier runs through (`hashes_needed`); with `commands`,
    the system's command names (`S` lines: what a command added to /usr/local may
    shadow), which only the baseline lists: later checks judge shadowing against the
    commands the node had when the window opened."""
    return (MANIFEST_SH.replace("TREES", " ".join(TREE_DIRS))
            .replace("DIRS", " ".join(MANIFEST_DIRS))
            .replace("LOADERS", " ".join(LOADER_FILES))
            + (HASHES_SH.replace("HASHED", " ".join(HASHED)) if hashes else "")
            + (COMMANDS_SH if commands else ""))


def hashes_needed(substrate) -> bool:
    """Whether a node's manifest needs content hashes: only where the agent controls the
    node's clock (`own_clock`, a VM's kernel). Elsewhere (a container cannot set the
    clock) every write to a file gives it a new ctime and a rename a new inode, which its
    `F` line already shows; the hashes cost a third of each manifest there."""
    return "own_clock" in substrate.capabilities


def parse_manifest(text: str) -> dict:
    """F lines (file metadata), H (hashes), S (system commands) and X: a directory whose
    listing failed part way (no process left to fork under a fork bomb's pids limit), so
    a file missing from it is not evidence of a deletion."""
    files, hashes, system, partial = {}, {}, [], []
    for line in text.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "X":
            partial.append(rest.rstrip("/"))
        elif tag == "F":
            path, _, meta = rest.partition("|")
            files[path] = meta
        elif tag == "H":
            digest, _, path = rest.partition("  ")
            hashes[path.strip()] = digest
        elif tag == "S":
            system.append(rest)
    out = {"files": files, "hashes": hashes, "system": sorted(set(system))}
    if partial:
        out["partial"] = sorted(set(partial))
    return out


def compare_manifests(before: dict, after: dict) -> list[tuple[str, str]]:
    """(kind, path) changes between two manifests."""
    changes = []
    for path, meta in after["files"].items():
        if path not in before["files"]:
            changes.append(("A", path))
        elif before["files"][path] != meta:
            changes.append(("M", path))
    partial = after.get("partial", ())
    changes += [("D", p) for p in before["files"] if p not in after["files"]
                and not any(p == x or p.startswith(x + "/") for x in partial)]
    changes += [("M", p) for p, h in after["hashes"].items()
                if before["hashes"].get(p, h) != h]
    return sorted(set(changes))


def manifest_path(paths, node: str) -> Path:
    return paths.root / "integrity" / f"{node}.json"


async def _exec(env, node, script: str, toolbox: str | None = None,
                stdin: bytes | None = None):
    return await env.substrate.exec(node, script, 120, env={"HARNESS_SOURCE": "harness"},
                                    toolbox=toolbox, stdin=stdin)


def _stdout(res, node, what: str = "integrity check") -> str:
    if res.exit_code != 0:
        raise RuntimeError(f"{what} on {node.name} failed (exit {res.exit_code}): "
                           f"{(res.stderr or res.stdout).strip()[-300:]}")
    return res.stdout


async def _run(env, node, toolbox: str, script: str) -> str:
    return _stdout(await _exec(env, node, script, toolbox), node)


async def power_state(env, node) -> str | None:
    """"on" or "off" as the substrate reports `node`'s power; None without an answer."""
    try:
        return await env.substrate.power(node, "status")
    except Exception:  # no answer: try the node itself, whose failure then speaks
        return None


async def powered_off(env, node) -> bool:
    """True when the substrate says `node` is off: a task may start with a node down (its
    BMC to use) and an agent may leave one down; such a node has nothing to compare."""
    return await power_state(env, node) == "off"


async def when_up(env, node, command, wait: float = BOOT_WAIT_SEC):
    """What `command()` (a command on `node`) returns once the node answers, or None when
    it failed because the node is off: a power-off in flight that its BMC did not report
    yet. A node that is on but does not answer (booting after a power-on) is asked again
    until `wait` seconds have passed (a node whose power is not reported is not)."""
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        try:
            return await command()
        except Exception:
            state = await power_state(env, node)
            if state == "off":
                return None
            if state != "on" or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(3)


async def baseline(env) -> list[str]:
    """Before the agent window (after the harness's own setup, e.g. snoopy's
    /etc/ld.so.preload): each node's manifest, kept in the trial dir (out of the agent's
    reach); `check` compares against it. The nodes are listed at once (each lists its own
    files). Returns the nodes skipped because they were off."""
    async def one(node) -> str | None:
        if await powered_off(env, node):
            return node.name
        out = await when_up(env, node, lambda: _baseline_manifest(env, node))
        if out is None:
            return node.name
        path = manifest_path(env.paths, node.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(parse_manifest(out)))
        return None

    return [name for name in await all_of(one(n) for n in env.nodes) if name]


async def all_of(coros) -> list:
    """The results of `coros`, run at once; all of them end before the first error (in
    their order) is raised, so nothing of them still runs when the caller cleans up."""
    done = await asyncio.gather(*coros, return_exceptions=True)
    for outcome in done:
        if isinstance(outcome, BaseException):
            raise outcome
    return done


def check_script(toolbox: str | None = None, hashes: bool = True) -> str:
    """Leftovers stopped, then the manifest; with `toolbox`, which is removed after (its
    last use on that node). Reads nothing from stdin (the verifier's run on the primary
    follows it in the same round trip, with the tests on stdin)."""
    rm = f"rm -rf {toolbox}\n" if toolbox else ""
    return "{\n" + LEFTOVERS_SH + manifest_script(hashes=hashes) + rm + "} </dev/null\n"


def read_check(env, node, out: str) -> tuple[list[dict], list[str], dict]:
    """What `check_script` printed on `node`: (what was killed, evidence of tampering
    against the baseline, the manifest now: what `changed_during` compares the node with
    once test.sh has run)."""
    killed = []
    for line in out.splitlines():
        if line.startswith("K "):
            try:
                killed.append(json.loads(line[2:]))
            except ValueError:
                continue
    path = manifest_path(env.paths, node.name)
    after = parse_manifest(out)
    if not path.exists():  # no baseline (a failure before the window): nothing to compare
        return killed, [], after
    before = json.loads(path.read_text())
    after["system"] = before["system"]  # for `changed_during`: the window-open commands
    return (killed, classify_changes(compare_manifests(before, after), set(before["system"]),
                                     image_modules(before["files"])), after)


async def _baseline_manifest(env, node) -> str:
    """The manifest under a fresh toolbox, in one round trip: the window has not opened, so
    the node's own tar may unpack the toolbox from the command's stdin (a node without
    one gets it through the substrate's archive channel first)."""
    top, hashes = new_toolbox_path(), hashes_needed(env.substrate)
    argv = " ".join(shlex.quote(a) for a in toolbox_argv(top, _removing(top, hashes)))
    res = await _exec(env, node, f"tar -x -C / || exit 97\nexec {argv}",
                      stdin=toolbox_tar(top))
    if res.exit_code == 97:  # no tar on the node
        toolbox = await install_toolbox(env.substrate, node)
        res = await _exec(env, node, _removing(toolbox, hashes), toolbox)
    return _stdout(res, node, "integrity baseline")


def _removing(toolbox: str, hashes: bool) -> str:
    """The manifest script, then `toolbox` removed (its last use on that node)."""
    return manifest_script(commands=True, hashes=hashes) + f"rm -rf {toolbox}\n"


async def check(env, node, toolbox: str) -> tuple[list[dict], list[str], dict]:
    """On `node`, in one round trip: kill the agent's leftovers, compare the node with its
    baseline, remove the toolbox (see `read_check` for what is returned)."""
    script = check_script(toolbox, hashes_needed(env.substrate))
    return read_check(env, node, await _run(env, node, toolbox, script))


NAMESPACE_SH = r"""
hx_stat() {
  hx_s=""; read -r hx_s < "/proc/$1/stat" 2>/dev/null || return 1
  hx_s=${hx_s##*) }; set -- $hx_s; hx_pp=$2; hx_st=${20}
}
hx_stat $$; hx_t0=$hx_st
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = "$$" ] && continue
  [ "$d/ns/mnt" -ef "/proc/$$/ns/mnt" ] || continue
  q=$p; hx_out=""
  while [ "$q" -gt 1 ] 2>/dev/null && [ "$q" != "$$" ]; do
    hx_stat "$q" || break
    if [ "$hx_pp" -gt 1 ] 2>/dev/null && ! [ "/proc/$hx_pp/ns/mnt" -ef "/proc/$$/ns/mnt" ]
    then hx_out=1; break; fi
    q=$hx_pp
  done
  [ "$q" = "$$" ] && continue
  hx_stat "$p" || continue; t=$hx_st
  c=$( (tr '\0' ' ' < "$d/cmdline") 2>/dev/null | head -c 120 | tr -cd 'a-zA-Z0-9 ._/=:-')
  kill -9 "$p" 2>/dev/null
  if [ "$t" -lt "$hx_t0" ] 2>/dev/null || [ -n "$hx_out" ]; then echo "N $p $c"; fi
done
true
"""


# test.sh's capabilities: the node's own (PID 1's bounding set: what any process of the
# agent may hold) plus CAP_SYS_PTRACE, which no process of the agent can hold. The toolbox's
# run holds them all (docker: a privileged exec); test.sh runs the node's programs, which read
# files the agent wrote (configs, plugins), so it gets no more than the agent has, but for
# the one capability that keeps the agent's processes out of its /proc entries. The node's
# setpriv (util-linux) does it, from a system directory the check above found unchanged.
BOUND_SH = r"""
hx_bound=""
for hx_sp in /usr/bin/setpriv /bin/setpriv; do
  [ -x "$hx_sp" ] || continue
  hx_bnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/1/status)
  case "$hx_bnd" in ''|*[!0-9a-f]*) break ;; esac
  hx_caps="+cap_19"; hx_i=0
  while [ "$hx_i" -lt 63 ]; do
    [ $(( (0x$hx_bnd >> hx_i) & 1 )) = 1 ] && hx_caps="$hx_caps,+cap_$hx_i"
    hx_i=$((hx_i + 1))
  done
  hx_bound="$hx_sp --inh-caps -all --bounding-set -all,$hx_caps"
  break
done
"""


def bound_script() -> str:
    """Sets `$hx_bound` to the command prefix that runs test.sh within the node's own
    capabilities plus CAP_SYS_PTRACE (`BOUND_SH`); empty where the node has no setpriv."""
    return BOUND_SH


def namespace_script() -> str:
    """Run by the verifier's shell in its private mount namespace right after test.sh:
    every process of that namespace that is not the shell's own descendant is killed (what
    test.sh left in the background, and anything that entered), and each that entered it is
    printed on an `N` line: one older than the shell (it called `setns` itself), or one
    whose line of ancestors in the namespace starts at a process of another namespace (it
    was started into it, `nsenter`; what test.sh left behind is the init's orphan).
    Fork-free on the common path: a process of another namespace costs one `test -ef`."""
    return NAMESPACE_SH


def entrants(text: str) -> list[str]:
    """Evidence lines for the `N` lines of `namespace_script`'s output."""
    return [f"process {line[2:].strip()} entered the verifier's namespace"
            for line in text.splitlines() if line.startswith("N ")][:20]


# rewritten by the ldconfig trigger of any package with a library that test.sh installs
VERIFIER_INSTALLS = frozenset({"/etc/ld.so.cache"})


def changed_during(before: dict, text: str, rewritable: frozenset = frozenset()) -> list[str]:
    """The tampering done while test.sh ran (`text`: the manifest the verifier's own run
    took after test.sh, `before`: the one `check` took just before it): a surviving service
    that swaps a program test.sh calls, or swaps it back afterwards (a container cannot set
    the clock: the write shows in ctime, a rename in the inode). Files test.sh adds (a
    verifier that installs its tools) count only where they shadow a system command; files
    in `rewritable` may change (a Harbor task's test.sh installs its tools with apt, whose
    ldconfig rewrites the loader's cache: `VERIFIER_INSTALLS`)."""
    after = parse_manifest(text)
    changes = [(k, p) for k, p in compare_manifests(before, after)
               if (k != "A" or p.startswith(SHADOW_DIRS))
               and not (k == "M" and p in rewritable)]
    # no command list (a node without baseline): any command added to /usr/local counts
    return [f"{line} (while test.sh ran)"
            for line in classify_changes(changes, set(before["system"]) or None)]


def available() -> bool:
    return shutil.which("busybox") is not None or any(Path(c).is_file()
                                                       for c in BUSYBOX_CANDIDATES)
