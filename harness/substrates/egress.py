"""A trial's egress, per phase: the elements of the harness firewall's sets for its bridge.

The nftables table (`harness.substrates.firewall`) drops everything a trial bridge sends
out unless its bridge is in `egress_public` (out through an uplink, masqueraded) or a
(bridge, address) pair is in `egress_allow`. `apply(bridge, policy)` makes the sets say
what `policy` says for that bridge alone, in one nft transaction:

- `no-network`: no element (nodes reach each other only);
- `public`: the bridge in `egress_public`;
- `allowlist`: each allowed host resolved now, on the host (an IPv4 literal is taken as it
  is), and one `egress_allow` element per address; the answers are returned so that the
  caller can pin them into the nodes' /etc/hosts (the nodes' own DNS goes nowhere).

`open_gateway(bridge, addr, port)` / `close_gateway(bridge)` manage the bridge's one
element of the set `gateway`: the model gateway's address and port on that bridge, open in
every network mode (`clear` removes it too).

Uplinks are the interfaces of the host's default routes plus `extra_uplinks` (config.yaml
`egress_uplinks`); traffic to any other interface (docker0, libvirt's, the LAN of a second
NIC without a default route) is dropped. Needs root (as the harness runs trials).

"The host" is the machine whose kernel holds the bridge: this one, unless a `runner` is
given (a callable running an argv there, e.g. `RemoteHost.command` for another machine's
libvirt); the firewall's table, the routes and the allowlist's DNS answers are then that
host's.

`enforce()` is what a substrate's `set_egress` does with it: the sets, then the allowlist's
answers pinned into every node's /etc/hosts and, where the nodes' resolver is the trial
bridge's own address (libvirt's dnsmasq; the firewall answers DNS there only for a bridge
in `egress_public`), `/etc/resolv.conf` pointed at it in public mode.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import shutil
import socket
import subprocess
from collections.abc import Callable

from harness.config import load_settings
from harness.errors import SubstrateError
from harness.substrates.firewall import TABLE

Runner = Callable[[list[str], "str | None"], subprocess.CompletedProcess]


def run_here(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    """The default runner: `argv` on this machine (text in and out)."""
    tool = shutil.which(argv[0]) or f"/usr/sbin/{argv[0]}"
    return subprocess.run([tool, *argv[1:]], input=stdin, capture_output=True, text=True)


def _nft(args: list[str], stdin: str | None = None, runner: Runner | None = None
         ) -> subprocess.CompletedProcess:
    return (runner or run_here)(["nft", *args], stdin)


def default_uplinks(runner: Runner | None = None) -> list[str]:
    """The interfaces of the host's IPv4 default routes."""
    proc = (runner or run_here)(["ip", "-j", "route", "show", "default"], None)
    try:
        return sorted({r["dev"] for r in json.loads(proc.stdout or "[]") if r.get("dev")})
    except (ValueError, TypeError):
        return []


def resolve(hosts: list[str], runner: Runner | None = None) -> dict[str, list[str]]:
    """host -> its IPv4 addresses, resolved now on the host (a literal maps to itself;
    a name that does not resolve maps to []); on another host through `getent`."""
    out: dict[str, list[str]] = {}
    for host in hosts:
        try:
            out[host] = [str(ipaddress.IPv4Address(host))]
            continue
        except ValueError:
            pass
        if runner is not None:
            proc = runner(["getent", "ahostsv4", host], None)
            out[host] = sorted({line.split()[0] for line in proc.stdout.splitlines()
                                if line.strip()}) if proc.returncode == 0 else []
            continue
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            out[host] = []
            continue
        out[host] = sorted({info[4][0] for info in infos})
    return out


def _elements(names: tuple[str, ...], bridge: str, runner: Runner | None = None
              ) -> dict[str, list[str]]:
    """The current elements for `bridge` of each set in `names`, in nft syntax, from one
    listing of the table."""
    proc = _nft(["-j", "list", "table", "inet", TABLE], runner=runner)
    if proc.returncode != 0:
        raise SubstrateError("egress", f"the trial firewall (table inet {TABLE}) is not "
                             "loaded: run `sudo scripts/setup.sh`")
    found: dict[str, list[str]] = {}
    for item in json.loads(proc.stdout).get("nftables", []):
        s = item.get("set") or {}
        if s.get("name") in names:
            found[s["name"]] = [e for elem in s.get("elem", []) if (e := _element(elem, bridge))]
    missing = [n for n in names if n not in found]
    if missing:
        raise SubstrateError("egress", f"the trial firewall has no set {missing[0]} "
                             "(an older harness loaded it): run `sudo scripts/setup.sh`")
    return found


def _element(elem, bridge: str) -> str:
    """`elem` of a set's JSON listing in nft syntax when it is `bridge`'s, else ""."""
    if isinstance(elem, dict) and "concat" in elem:
        iface, *rest = elem["concat"]
        return " . ".join([f'"{iface}"', *map(str, rest)]) if iface == bridge else ""
    return f'"{elem}"' if elem == bridge else ""


def apply(bridge: str, policy, extra_uplinks: list[str] = (), runner: Runner | None = None
          ) -> dict[str, list[str]]:
    """Make the firewall's sets carry `policy` (a task's `NetworkPolicy`: `mode`,
    `allowed_hosts`) for `bridge`; return the pinned answers (host -> addresses) of an
    allowlist, else {}."""
    lines = [f"add element inet {TABLE} uplinks {{ \"{dev}\" }}"
             for dev in [*default_uplinks(runner), *extra_uplinks]]
    for set_name, old in _elements(("egress_public", "egress_allow"), bridge, runner).items():
        if old:
            lines.append(f"delete element inet {TABLE} {set_name} {{ {', '.join(old)} }}")
    pins: dict[str, list[str]] = {}
    if policy.mode == "public":
        lines.append(f"add element inet {TABLE} egress_public {{ \"{bridge}\" }}")
    elif policy.mode == "allowlist":
        pins = resolve(policy.allowed_hosts, runner)
        addrs = sorted({a for found in pins.values() for a in found})
        if addrs:
            elems = ", ".join(f'"{bridge}" . {a}' for a in addrs)
            lines.append(f"add element inet {TABLE} egress_allow {{ {elems} }}")
    proc = _nft(["-f", "-"], "\n".join(lines) + "\n", runner)
    if proc.returncode != 0:
        raise SubstrateError("egress", f"nft could not set egress {policy.describe()} for "
                             f"{bridge}: {proc.stderr.strip()[-300:]}")
    return pins


def clear(bridge: str, runner: Runner | None = None) -> None:
    """No egress for `bridge` any more, nor its gateway opening (teardown); quiet when the
    table or nft is gone."""
    try:
        lines = [f"delete element inet {TABLE} {name} {{ {', '.join(old)} }}"
                 for name, old in _elements(("egress_public", "egress_allow", "gateway"),
                                            bridge, runner).items() if old]
        if lines:
            _nft(["-f", "-"], "\n".join(lines) + "\n", runner)
    except (SubstrateError, OSError, ValueError):
        return


def open_gateway(bridge: str, addr: str, port: int, runner: Runner | None = None) -> None:
    """Let the nodes of `bridge` reach the model gateway at `addr:port` (the bridge's own
    address) and nothing else of the host: the one element of the set `gateway` for it."""
    ipaddress.IPv4Address(addr)
    lines = [f"delete element inet {TABLE} gateway {{ {', '.join(old)} }}"
             for old in [_elements(("gateway",), bridge, runner)["gateway"]] if old]
    lines.append(f'add element inet {TABLE} gateway {{ "{bridge}" . {addr} . {int(port)} }}')
    proc = _nft(["-f", "-"], "\n".join(lines) + "\n", runner)
    if proc.returncode != 0:
        raise SubstrateError("gateway", f"nft could not open {addr}:{port} for {bridge}: "
                             f"{proc.stderr.strip()[-300:]}")


def close_gateway(bridge: str, runner: Runner | None = None) -> None:
    """Close `bridge`'s way to the model gateway; quiet when the table or nft is gone."""
    try:
        old = _elements(("gateway",), bridge, runner)["gateway"]
        if old:
            _nft(["-f", "-"], f"delete element inet {TABLE} gateway {{ {', '.join(old)} }}\n",
                 runner)
    except (SubstrateError, OSError, ValueError):
        return


def uplinks(settings=None, extra: list[str] = ()) -> list[str]:
    """The extra uplinks of config.yaml (`egress_uplinks`, for every substrate: the
    firewall's `uplinks` set is the host's) plus a substrate's own `extra`."""
    settings = settings or load_settings()
    return list(dict.fromkeys([*settings.egress_uplinks, *extra]))


async def enforce(substrate, bridge: str, nodes: list, policy, extra_uplinks: list[str] = (),
                  resolver: str | None = None, runner: Runner | None = None
                  ) -> dict[str, list[str]]:
    """`apply` for the trial's bridge, then on every node: the allowlist's answers pinned
    into /etc/hosts; with `resolver` (the bridge's own address) and `public`, the
    nodes' /etc/resolv.conf names it. Returns the pins."""
    pins = await asyncio.to_thread(apply, bridge, policy, extra_uplinks, runner)
    script = hosts_script(pins) if policy.mode == "allowlist" else None
    if policy.mode == "public" and resolver:
        script = f"printf 'nameserver {resolver}\\n' > /etc/resolv.conf"
    for node in nodes if script else []:
        res = await substrate.exec(node, script, 30, env={"HARNESS_SOURCE": "harness"})
        if not res.ok:
            raise SubstrateError(substrate.name, f"cannot set {policy.describe()} name "
                                 f"resolution on {node.name}: {res.stderr.strip()[-300:]}")
    return pins


def hosts_script(pins: dict[str, list[str]]) -> str:
    """A shell command that replaces the harness-pinned lines of /etc/hosts with `pins`."""
    tag = "# harness egress allowlist"
    lines = "".join(f"{addrs[0]} {host} {tag}\\n" for host, addrs in pins.items()
                    if addrs and host != addrs[0])
    return (f"grep -v '{tag}$' /etc/hosts > /etc/hosts.hx 2>/dev/null; "
            f"printf '{lines}' >> /etc/hosts.hx; cat /etc/hosts.hx > /etc/hosts; "
            "rm -f /etc/hosts.hx")
