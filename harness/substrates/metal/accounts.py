"""The two accounts of a pool machine's BMC, and how the harness keeps them apart.

- The **task-facing account** (slot `bmc.user_id`, 2 by default; `elabman` on an emulated
  pool, the name CloudLab gives it) is what a trial's primary gets in
  /etc/harness/bmc-credentials. A task or an agent with root on a node may change it
  in-band (`ipmitool user set password 2 ...` through /dev/ipmi0, as InfraBench's IPMI task
  does at bootstrap), along with the BMC's LAN settings.
- The **harness account** (`bmc.harness`: a slot of its own, `HARNESS_USER_ID` on an
  emulated pool, its password in `$HARNESS_HOME/secrets/`) is what power, resets, gc and
  the local portal use. No task and no agent is given it: it is in no run directory, no
  node file and no cluster-info (the inventory names BMC addresses only).

A reset puts both accounts and the LAN channel back as the pool says: an emulated BMC from
its configuration (`emulate.reimage`: ipmi_sim restarted without the state an agent left);
a real one out of band through the harness account (`restore_out_of_band`) when its BMC
still accepts it, else in-band on the node (`restore_in_band`: root, ipmitool over
/dev/ipmi0). Then `check` must accept the harness account (it logs in and reads its own
access: administrator, IPMI messaging on), or the machine is quarantined (`lease`) until
`harness pool repair`.

Passwords never go on a command line: ipmitool gets the harness's in its environment
(`-E`), and the commands that set an account's password go to `ipmitool shell` on stdin.
"""

from __future__ import annotations

import re

from harness.errors import SubstrateError
from harness.substrates import ipmi

TASK_USER_ID = 2
# the harness's slot on emulated pools: slot 3 is the cloudlab substrate's per-trial in-band
# account (cloudlab/inband.py), which the local portal's machines also get
HARNESS_USER_ID = 4
CLOUDLAB_USER = "elabman"  # CloudLab's name for a node's BMC account (user id 2)
PASSWORD_MAX = 20  # IPMI 2.0 (16 for IPMI 1.5 sessions)

_FIELD = re.compile(r"^(User Name|IPMI Messaging|Privilege Level)\s*:\s*(.*?)\s*$", re.M)
# what ipmitool -v says when nothing answered (not a refusal): no session was even offered
_SILENT = ("Get Auth Capabilities", "Get Channel Authentication Capabilities",
           "No response from remote controller", "Insufficient resources for session")
_WHY = (("unauthorized name", "no such user name in its slot"),
        ("HMAC is invalid", "wrong password"),
        ("privilege level exceeds limit", "its privilege was lowered"),
        ("Activate Session", "the login was refused"),
        ("Unable to establish", "the login was refused"))


def _label(creds: dict) -> str:
    return f"BMC {creds['address']}:{creds.get('port') or 623}"


def check(creds: dict, what: str = "the harness account") -> None:
    """The BMC accepts `creds` for what the harness needs: a session, and (with a
    `user_id`) administrator privilege and IPMI messaging on its LAN channel. Raises
    `ipmi.BmcRefused` when the BMC answers but refuses, SubstrateError when nothing
    answers. Messages name the slot, never the user name or password."""
    uid, channel = creds.get("user_id"), creds.get("channel") or 1
    args = ("channel", "getaccess", str(channel), str(uid)) if uid else \
        ("chassis", "power", "status")
    proc = ipmi.run(creds, *args, retries=(1, 2), verbose=True, timeout=30)
    text = f"{proc.stdout}\n{proc.stderr}"
    slot = f"{what} (user id {uid})" if uid else what
    if proc.returncode != 0:
        if any(s in text for s in _SILENT):
            raise SubstrateError("baremetal", f"{_label(creds)}: no answer to {slot}")
        why = next((w for k, w in _WHY if k in text), "refused")
        raise ipmi.BmcRefused(f"{_label(creds)} refuses {slot}: {why}")
    if not uid:
        return
    fields = dict(_FIELD.findall(proc.stdout))
    name, priv = fields.get("User Name"), fields.get("Privilege Level", "")
    if name is not None and name != str(creds["user"]):
        raise ipmi.BmcRefused(f"{_label(creds)}: {slot} was renamed")
    if priv and "ADMINISTRATOR" not in priv.upper():
        raise ipmi.BmcRefused(f"{_label(creds)}: {slot} lost its administrator privilege "
                              f"(now {priv})")
    if fields.get("IPMI Messaging", "enabled").lower() != "enabled":
        raise ipmi.BmcRefused(f"{_label(creds)}: {slot} has IPMI messaging disabled")


def _safe(value: str, what: str) -> str:
    if not value or any(c.isspace() or c in "\"'\\#" for c in value):
        raise SubstrateError("baremetal", f"{what}: a BMC account value the harness can "
                             "restore has no spaces, quotes, backslashes or '#'")
    return value


def restore_commands(accounts: list[dict], channel: int = 1) -> list[str]:
    """ipmitool shell commands that put `accounts` (user_id, user, password) back: name,
    password, enabled, administrator with IPMI messaging on the LAN `channel`; then the
    channel's access on. Commands a BMC does not support fail alone (a fixed name)."""
    cmds: list[str] = []
    for a in accounts:
        i, pw = int(a["user_id"]), _safe(str(a["password"]), f"user id {a['user_id']}")
        if len(pw) > PASSWORD_MAX:
            raise SubstrateError("baremetal", f"user id {i}: a BMC password has at most "
                                 f"{PASSWORD_MAX} characters")
        cmds += [f"user set name {i} {_safe(str(a['user']), f'user id {i}')}",
                 f"user set password {i} {pw}" + (" 20" if len(pw) > 16 else ""),
                 f"channel setaccess {channel} {i} callin=on ipmi=on link=on privilege=4",
                 f"user priv {i} 4 {channel}", f"user enable {i}"]
    return [*cmds, f"lan set {channel} access on"]


def restore_out_of_band(harness: dict, task: dict) -> None:
    """Both accounts and the LAN channel, through the harness account (which the BMC
    must accept: `check` first); then both must work."""
    ipmi.shell(harness, restore_commands([task, harness], int(harness.get("channel") or 1)))
    check(harness)
    check(task, "the task-facing account")


def in_band_script(address: str, channel: int = 1) -> str:
    """What runs on the node (root) to restore its BMC in-band: the BMC's address on the
    LAN channel when it moved (ipmitool lan set), then `ipmitool shell` with the
    `restore_commands` on its stdin (the passwords are on no command line of the node)."""
    return (f"command -v ipmitool >/dev/null && [ -e /dev/ipmi0 ] || {{ echo 'no in-band "
            f"IPMI on this node (ipmitool, /dev/ipmi0)' >&2; exit 3; }}\n"
            f"cur=$(ipmitool lan print {channel} </dev/null 2>/dev/null "
            "| sed -n 's/^IP Address  *: *//p')\n"
            f"if [ \"$cur\" != '{address}' ]; then\n"
            f"  ipmitool lan set {channel} ipsrc static </dev/null >/dev/null 2>&1\n"
            f"  ipmitool lan set {channel} ipaddr '{address}' </dev/null >/dev/null 2>&1\n"
            "fi\nipmitool shell >/dev/null 2>&1; true\n")


def in_band_stdin(harness: dict, task: dict) -> bytes:
    channel = int(harness.get("channel") or 1)
    return ("".join(f"{c}\n" for c in restore_commands([task, harness], channel))
            + "exit\n").encode()


def ipmi_sim_users(accounts: list[dict]) -> str:
    """ipmi_sim `user` lines (lan.conf) for `accounts` (user_id, user, password)."""
    return "".join(f"  user {int(a['user_id'])} true \"{_safe(str(a['user']), 'user')}\" "
                   f"\"{_safe(str(a['password']), 'password')}\" admin 10 md5 md2 straight\n"
                   for a in accounts)
