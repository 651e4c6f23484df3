"""`harness cloudlab`: the local CloudLab portal (`serve`) and profile scripts (`profile`)."""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from pathlib import Path

import typer

from harness.errors import InputError
from harness.paths import harness_home
from harness.substrates.cloudlab import CloudlabSubstrate, api, profile, reuse
from harness.substrates.cloudlab.machines import PoolMachines
from harness.substrates.cloudlab.portal import Portal
from harness.substrates.cloudlab.portal_http import serve as start
from harness.substrates.metal.pool import load_pool

app = typer.Typer(help="CloudLab: a local portal over an emulated pool, profile scripts.",
                  no_args_is_help=True)

TOKEN_ENV = "CLOUDLAB_TOKEN"


def token_file() -> Path:
    return harness_home() / api.LOCAL_TOKEN


def portal_token() -> tuple[str, str]:
    """(token, where it comes from): $CLOUDLAB_TOKEN, else the portal's token file (made
    once, 0600)."""
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV], f"${TOKEN_ENV}"
    path = token_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
    return path.read_text().strip(), str(path)


@app.command("serve")
def serve(pool: str = typer.Option(..., "--pool", help="The pool whose machines the portal "
                                   "allocates (`harness pool emulate NAME` makes one)."),
          host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
          port: int = typer.Option(43795, "--port", help="Port (the API description's)."),
          settle_sec: float = typer.Option(2.0, "--settle-sec", help="Seconds an experiment "
                                           "stays `created` before it is set up."),
          max_pending: int = typer.Option(4, "--max-pending", help="Experiments being set up "
                                          "at once before POST /experiments answers 429."),
          redirect_slash: bool = typer.Option(False, "--redirect-slash", help="Answer 307 to "
                                              "the trailing-slash form of collection paths."),
          ) -> None:
    """Serve the CloudLab Portal API on this machine; experiments get REAL machines of the
    pool (leased, powered and reset through their BMCs). Ctrl-C terminates every experiment
    (machines reset and released) before it exits. The token is $CLOUDLAB_TOKEN, else the
    file $HARNESS_HOME/secrets/cloudlab-portal.token (made on first use)."""
    load_pool(pool)  # a missing or bad pool file: its one-line error, before listening
    if max_pending < 0:
        raise InputError("--max-pending: expected 0 or more")
    token, source = portal_token()
    portal = Portal(PoolMachines(pool), settle_sec=settle_sec, max_pending=max_pending,
                    log=lambda line: print(line, flush=True))
    try:
        server, _ = start(portal, token, host, port, redirect_slash)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    portal.base_url = f"http://{host}:{server.server_port}"
    print(f"local CloudLab portal on {portal.base_url} (pool {pool}; token from {source})",
          flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    print("stopping: terminating every experiment", flush=True)
    server.shutdown()
    shutdown(portal)


def shutdown(portal, timeout: float = 900.0) -> None:
    """Terminate every experiment and wait until their machines are released."""
    for exp in list(portal.experiments.values()):
        portal.terminate(exp.id)
    deadline = time.monotonic() + timeout
    while portal.experiments and time.monotonic() < deadline:
        time.sleep(1)
    portal.close()


@app.command("profile")
def profile_cmd(nodes: int = typer.Option(3, "--nodes", help="Nodes (node0..)."),
                hardware_type: str = typer.Option("", "--hardware-type"),
                image: str = typer.Option("", "--image", help="Disk image URN."),
                check: bool = typer.Option(True, "--check/--no-check", help="Run the script "
                                           "(geni-lib) and print its request RSpec instead."),
                ) -> None:
    """Print the geni-lib profile script the harness renders for N nodes (or, with
    --check, the request RSpec it produces)."""
    if nodes < 1:
        raise InputError("--nodes: expected 1 or more")
    script = profile.render([f"node{i}" for i in range(nodes)], hardware_type, image)
    print(profile.run(script)["rspec"] if check else script, end="")


@app.command("reuse-create")
def reuse_create(name: str = typer.Argument(..., help="Pool name (lowercase, digits, '-')."),
                 nodes: int = typer.Option(3, "--nodes", help="Nodes in the experiment.")
                 ) -> None:
    """Reuse mode: allocate ONE experiment (config.yaml substrates.cloudlab: portal,
    project, hardware_type, image) and make it the bare-metal pool NAME, reloaded through
    the portal between trials (`substrates.baremetal.pool: NAME`). Idempotent."""
    reuse.create(CloudlabSubstrate(), name, nodes)


@app.command("reuse-remove")
def reuse_remove(name: str = typer.Argument(..., help="Pool name.")) -> None:
    """Terminate a reuse pool's experiment and remove the pool."""
    reuse.remove(CloudlabSubstrate(), name)
