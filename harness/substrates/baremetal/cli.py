"""`harness pool`: pools of bare-metal machines (list, show/status, emulate, check,
repair, remove)."""

from __future__ import annotations

import json
import sys
import time

import typer

from harness.errors import HarnessError, InputError
from harness.substrates import ipmi
from harness.substrates.metal import accounts, emulate, lease, reset
from harness.substrates.metal.pool import NAME, load_pool, pool_names

app = typer.Typer(help="Pools of bare-metal machines (real, or emulated with QEMU + "
                  "ipmi_sim BMCs).", no_args_is_help=True)


@app.command("list")
def list_pools() -> None:
    """Every pool file under $HARNESS_HOME/pools, with its machines and leases."""
    names = pool_names()
    if not names:
        print("no pools (harness pool emulate NAME makes an emulated one)")
    for name in names:
        pool = load_pool(name)
        leased = lease.read(name)
        held = lease.quarantined(name)
        kind = "emulated" if pool.emulated else "real"
        print(f"{name}: {len(pool.machines)} {kind} machine(s), reset {pool.reset}, "
              f"{len(leased)} leased" + (f", {len(held)} quarantined ({', '.join(sorted(held))}"
                                         f": harness pool status {name})" if held else ""))


def _rows(name: str) -> tuple[object, list[dict]]:
    pool = load_pool(name)
    leases, held = lease.read(name), lease.quarantined(name)
    rows = [{"machine": m.name, "ssh": f"{m.ssh.user}@{m.ssh.host}:{m.ssh.port}",
             "bmc": f"{m.bmc.address}:{m.bmc.port} ({m.bmc.interface})" if m.bmc else "-",
             "bmc_accounts": ({"task": m.bmc.user_id,
                               "harness": m.bmc.harness.user_id if m.bmc.harness else None}
                              if m.bmc else None),
             "tags": m.tags, "lease": leases.get(m.name, {}).get("trial"),
             "lease_live": lease.is_live(leases[m.name]) if m.name in leases else None,
             "quarantine": held.get(m.name)}
            for m in pool.machines]
    return pool, rows


def _state(r: dict) -> str:
    if r["quarantine"]:
        q = r["quarantine"]
        return (f"QUARANTINED: {q.get('reason')}" + (f" (trial {q['trial']})" if q.get("trial")
                                                      else "") + f"; `{q.get('repair')}`")
    if not r["lease"]:
        return "free"
    return f"leased to {r['lease']}" + ("" if r["lease_live"] else
                                        " (stale: harness gc reclaims it)")


@app.command("show")
def show(name: str = typer.Argument(..., help="Pool name."),
         as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """The pool's machines (addresses, BMC, tags), their leases and quarantines; no
    credential."""
    pool, rows = _rows(name)
    if as_json:
        print(json.dumps({"pool": name, "reset": pool.reset, "emulated": pool.emulated,
                          "machines": rows}, indent=2))
        return
    for r in rows:
        print(f"{r['machine']:10} ssh {r['ssh']:28} bmc {r['bmc']:28} {_state(r)}")


@app.command("status")
def status(name: str = typer.Argument(..., help="Pool name."),
           as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")
           ) -> None:
    """Each machine: free, leased (live or stale) or quarantined (why, since which trial,
    and the command that brings it back)."""
    show(name, as_json)


@app.command("check")
def check(name: str = typer.Argument(..., help="Pool name."),
          as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")
          ) -> None:
    """Log in to every BMC with the harness's own account (machines leased by running
    trials are left alone); a BMC that refuses it gets its machine quarantined. Exit 1
    when a machine is quarantined."""
    pool = load_pool(name)
    leases = lease.read(name)
    out = {}
    for m in pool.machines:
        if m.bmc is None:
            out[m.name] = "no BMC"
        elif m.name in lease.quarantined(name):
            out[m.name] = "quarantined"
        elif m.name in leases and lease.is_live(leases[m.name]):
            out[m.name] = "leased (not checked)"
        else:
            try:
                accounts.check(pool.bmc_credentials(m))
                out[m.name] = "ok"
            except ipmi.BmcRefused as exc:
                lease.quarantine(name, m.name, str(exc).removeprefix("baremetal: "))
                out[m.name] = "quarantined"
            except HarnessError as exc:
                out[m.name] = f"no answer: {exc}"
    if as_json:
        print(json.dumps({"pool": name, "machines": out}, indent=2))
    else:
        held = lease.quarantined(name)
        for m, state in out.items():
            why = f": {held[m].get('reason')}; `{held[m].get('repair')}`" if m in held else ""
            print(f"{m:10} {state}{why}")
    if any(v == "quarantined" for v in out.values()):
        raise typer.Exit(1)


@app.command("repair")
def repair(name: str = typer.Argument(..., help="Pool name."),
           machines: list[str] = typer.Argument(None, help="Machines (default: every "
                                                "quarantined one)."),
           ) -> None:
    """Bring back machines whose BMC refused the harness: an emulated machine's BMC
    configuration is made again (a new harness password) and ipmi_sim restarted without
    the state an agent left in it, then the machine is reimaged; a real machine's BMC
    accounts are restored (out of band, else in-band on the node) and it is reset. The
    harness account must work afterwards; then the quarantine is lifted."""
    pool = load_pool(name)
    held = lease.quarantined(name)
    names = list(machines or held)
    if not names:
        print(f"pool {name}: no machine is quarantined")
        return
    leases = lease.read(name)
    failed = []
    for machine in names:
        pool.machine(machine)  # (an unknown name: InputError with the valid ones)
        if machine in leases and lease.is_live(leases[machine]):
            raise InputError(f"machine {machine} of pool {name} is leased by running trial "
                             f"{leases[machine].get('trial')}; repair it once that ends",
                             key="machines")
        start = time.monotonic()
        try:
            how = reset.repair(pool, machine, log=print)
        except HarnessError as exc:
            reason = str(exc).removeprefix("baremetal: ")
            if isinstance(exc, ipmi.BmcRefused):
                lease.quarantine(name, machine, reason)
            print(f"{machine}: repair failed: {reason}", file=sys.stderr)
            failed.append(machine)
            continue
        lifted = lease.lift(name, machine)
        print(f"{machine}: repaired in {time.monotonic() - start:.0f}s ({how})"
              + ("; quarantine lifted" if lifted else ""))
    if failed:
        raise typer.Exit(1)


@app.command("emulate")
def emulate_pool(name: str = typer.Argument(..., help="Pool name (lowercase, digits, '-')."),
                 nodes: int = typer.Option(3, "--nodes", help="Machines in the pool."),
                 memory_mb: int = typer.Option(512, "--memory-mb", help="Memory per machine.")
                 ) -> None:
    """Make (or bring back up) an emulated pool: QEMU machines whose BMCs are OpenIPMI's
    ipmi_sim (IPMI 1.5 lan and 2.0 lanplus on a management network, in-band /dev/ipmi0).
    Idempotent; writes $HARNESS_HOME/pools/NAME.yaml like a real pool's."""
    if not NAME.match(name):
        raise InputError(f"{name!r}: lowercase letters, digits and '-', starting with a "
                         "letter", key="name")
    start = time.monotonic()
    pool = emulate.emulate(name, nodes=nodes, memory_mb=memory_mb)
    print(f"pool {name}: {len(pool.machines)} emulated machine(s) up in "
          f"{time.monotonic() - start:.0f}s ({emulate.pool_path(name)})")


@app.command("remove")
def remove(name: str = typer.Argument(..., help="Pool name."),
           force: bool = typer.Option(False, "--force", help="Even with live leases.")) -> None:
    """Remove an emulated pool (machines, BMCs, networks, files); a real pool's file is
    yours to delete."""
    pool = load_pool(name)
    if not pool.emulated:
        raise InputError(f"pool {name} is not emulated; delete {emulate.pool_path(name)} "
                         "yourself", key="name")
    live = [m for m, r in lease.read(name).items() if lease.is_live(r)]
    if live and not force:
        raise InputError(f"pool {name}: machines {live} are leased by running trials "
                         "(--force removes them anyway)", key="name")
    for item in emulate.remove(name):
        print(f"removed {item}")
