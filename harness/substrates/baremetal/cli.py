"""`harness pool`: pools of bare-metal machines (list, show, emulate, remove)."""

from __future__ import annotations

import json
import time

import typer

from harness.errors import InputError
from harness.substrates.baremetal import emulate, lease
from harness.substrates.baremetal.pool import NAME, load_pool, pool_names

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
        kind = "emulated" if pool.emulated else "real"
        print(f"{name}: {len(pool.machines)} {kind} machine(s), reset {pool.reset}, "
              f"{len(leased)} leased")


@app.command("show")
def show(name: str = typer.Argument(..., help="Pool name."),
         as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """The pool's machines (addresses, BMC, tags) and their leases; no credential."""
    pool = load_pool(name)
    leases = lease.read(name)
    rows = [{"machine": m.name, "ssh": f"{m.ssh.user}@{m.ssh.host}:{m.ssh.port}",
             "bmc": f"{m.bmc.address}:{m.bmc.port} ({m.bmc.interface})" if m.bmc else "-",
             "tags": m.tags, "lease": leases.get(m.name, {}).get("trial"),
             "lease_live": lease.is_live(leases[m.name]) if m.name in leases else None}
            for m in pool.machines]
    if as_json:
        print(json.dumps({"pool": name, "reset": pool.reset, "emulated": pool.emulated,
                          "machines": rows}, indent=2))
        return
    for r in rows:
        state = "free" if not r["lease"] else (f"leased to {r['lease']}" + (
            "" if r["lease_live"] else " (stale: harness gc reclaims it)"))
        print(f"{r['machine']:10} ssh {r['ssh']:28} bmc {r['bmc']:28} {state}")


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
