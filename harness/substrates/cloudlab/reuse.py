"""Reuse mode: one CloudLab experiment serving many trials as a bare-metal pool.

Allocating an experiment per trial costs minutes on CloudLab (and may wait for hardware).
`harness cloudlab reuse create NAME --nodes N` allocates one experiment with the same
Terraform module and provider as a trial (its root in `$HARNESS_HOME/cloudlab/pools/NAME/`),
makes an in-band BMC account on each node, and writes a pool file
(`$HARNESS_HOME/pools/NAME.yaml`, BMC credentials in its own ansible-vault) whose reset is
`reimage` through the portal's `reload` node operation. Trials then lease its machines
like any pool's (`substrates.baremetal.pool: NAME`): exclusive leases, reload between
trials, `harness gc` for stale leases. The trade-off: the allocation is paid once, but
every trial still pays a reload, the nodes are the same hardware for every trial, and the
experiment must be kept alive (`harness cloudlab reuse extend NAME --hours H`) and removed
(`reuse remove`), or it expires and takes the pool with it. Its record in the experiment
ledger stays live while the pool file exists, so gc never terminates it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from harness.errors import InputError, PreflightError, SubstrateError
from harness.paths import harness_home, terraform_cli_config
from harness.results import write_json_atomic
from harness.substrates import ssh
from harness.substrates.cloudlab import api, experiments, inband, profile
from harness.substrates.metal import emulate, lease
from harness.substrates.metal.pool import NAME as POOL_NAME
from harness.substrates.metal.pool import load_pool, pool_path, pools_dir


def terraform(tf: Path, *args: str) -> str:
    """One Terraform command in the pool's root (the harness's CLI config: providers from
    its mirror); its stdout, or SubstrateError with the end of its output."""
    binary = harness_home() / "bin" / "terraform"
    binary = str(binary) if binary.exists() else shutil.which("terraform")
    if not binary:
        raise PreflightError("terraform not found; run scripts/setup.sh")
    env = {**os.environ, "TF_CLI_CONFIG_FILE": str(terraform_cli_config()),
           "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}
    proc = subprocess.run([binary, f"-chdir={tf}", *args, "-no-color"], env=env,
                          capture_output=True, text=True)
    with (tf / "terraform.log").open("a") as log:
        log.write(f"$ terraform {' '.join(args)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).split())[-600:]
        raise SubstrateError("cloudlab", f"terraform {args[0]} failed in {tf}: {tail}")
    return proc.stdout


def root(name: str) -> Path:
    return harness_home() / "cloudlab" / "pools" / name


def owner_id(name: str) -> str:
    return f"pool:{name}"


def create(sub, name: str, nodes: int, log=print) -> Path:
    """Allocate the experiment and write the pool file; idempotent (apply again)."""
    if not POOL_NAME.match(name) or not 1 <= nodes <= 64:
        raise InputError(f"reuse create {name!r} --nodes {nodes}: a pool name (lowercase, "
                         "digits, '-') and 1 to 64 nodes")
    if pool_path(name).exists() and not (root(name) / "terraform").exists():
        raise InputError(f"pool {name} exists and is not a CloudLab reuse pool")
    sub.token()  # (exported as CLOUDLAB_TOKEN for the provider)
    names = [f"node{i}" for i in range(nodes)]
    exp = experiments.experiment_name(owner_id(name))
    cfg = sub.config
    experiments.reserve(exp, owner_id(name), "cloudlab-reuse", sub.portal_url, cfg.project,
                        nodes, cfg.max_experiments, cfg.max_nodes, 0, str(root(name)), 24)
    experiments.mark_pool(exp, name)
    variables = {"trial_id": owner_id(name), "experiment": exp, "project": sub.config.project,
                 "profile_script": profile.render(names, sub.config.hardware_type, sub.config.image,
                                                  f"harness reuse pool {name}"),
                 "profile_name": exp, "profile_project": sub.config.project,
                 "bindings": {"n": str(nodes)}, "duration": 24, "python": sys.executable,
                 "sshpubkey": Path(f"{inband.key_path()}.pub").read_text().strip()}
    tf = root(name) / "terraform"
    tf.mkdir(parents=True, exist_ok=True)
    doc = {"terraform": {"required_providers": {k: {"source": v["source"],
                                                    "version": v["version"]}
                                                for k, v in sub.providers.items()}},
           "provider": sub.provider_config(),
           "module": {"pool": {"source": str(sub.terraform_module()), **variables}},
           "output": {"nodes": {"value": "${module.pool.nodes}"}}}
    (tf / "main.tf.json").write_text(json.dumps(doc, indent=2) + "\n")
    log(f"cloudlab reuse {name}: allocating experiment {sub.config.project},{exp} ({nodes} nodes)")
    terraform(tf, "init", "-input=false")
    terraform(tf, "apply", "-auto-approve", "-input=false")
    got = json.loads(terraform(tf, "output", "-json", "nodes"))
    creds = asyncio.run(_accounts(name, got))
    _write_pool(name, sub, exp, got, creds)
    log(f"cloudlab reuse {name}: pool file {pool_path(name)}")
    return pool_path(name)


async def _accounts(name: str, got: list[dict]) -> dict[str, dict]:
    async def one(n: dict) -> tuple[str, dict | None]:
        await ssh.wait_ready(n["ssh_host"], inband.key_path(), 600, user=n["ssh_user"] or "root",
                             port=int(n["ssh_port"] or 22))

        async def run(cmd, timeout, stdin):
            return await ssh.exec_on(n["ssh_host"], inband.key_path(), cmd, timeout,
                                     stdin=stdin, user=n["ssh_user"] or "root",
                                     port=int(n["ssh_port"] or 22))

        return n["client_id"], await inband.make_account(run, owner_id(name), n["client_id"])

    return dict(await asyncio.gather(*(one(n) for n in got)))


def _write_pool(name: str, sub, exp: str, got: list[dict], creds: dict) -> None:
    secret = inband.secrets_dir() / f"{name}.vault-pass"
    if not secret.exists():
        secret.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        emulate.write_secret(secret, secrets.token_urlsafe(24) + "\n")
    # Ansible's vault here only: importing it costs every `harness` command (--help too)
    from ansible.constants import DEFAULT_VAULT_ID_MATCH
    from ansible.parsing.vault import VaultLib, VaultSecret

    lib = VaultLib([(DEFAULT_VAULT_ID_MATCH, VaultSecret(secret.read_bytes().strip()))])
    data = {f"{c}_bmc_{k}": v[k] for c, v in creds.items() if v for k in ("user", "password")}
    (pools_dir() / f"{name}.vault.yml").write_bytes(lib.encrypt(yaml.safe_dump(data).encode()))
    command = (f"'{sys.executable}' -m harness.substrates.cloudlab.reuse reload --pool {name} "
               '--machine "$HX_MACHINE"')
    doc = {"reset": "reimage", "reimage_command": command, "vault_file": f"{name}.vault.yml",
           "vault_password_file": str(secret), "machines": [{
               "name": n["client_id"], "tags": ["cloudlab", sub.config.hardware_type or "any"],
               "ssh": {"host": n["ssh_host"], "port": int(n["ssh_port"] or 22),
                       "user": n["ssh_user"] or "root", "key": str(inband.key_path())},
               **({"bmc": {"address": creds[n["client_id"]]["address"], "port": 623,
                           "interface": "lan", "user_id": inband.SLOT,
                           "user": f"vault:{n['client_id']}_bmc_user",
                           "password": f"vault:{n['client_id']}_bmc_password"}}
                  if creds.get(n["client_id"]) else {})} for n in got]}
    path = pool_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(f"# A CloudLab reuse pool (harness cloudlab reuse): experiment "
                   f"{sub.config.project},{exp} at {sub.portal_url}.\n"
                   + yaml.safe_dump(doc, sort_keys=False))
    tmp.replace(path)
    write_json_atomic(root(name) / "reuse.json", {"experiment": exp, "project": sub.config.project,
                                                  "portal": sub.portal_url})
    load_pool(name)  # the file it wrote is a valid pool


def reload(name: str, machine: str, settle_sec: float = 3600.0) -> None:
    """The pool's reset: the portal's `reload` of the node (a fresh image; CloudLab puts
    the experiment's keys back), then wait for it to answer SSH."""
    info = json.loads((root(name) / "reuse.json").read_text())
    client = api.Portal(info["portal"], api.resolve_token(info["portal"]))
    client.node_op(f"{info['project']},{info['experiment']}", machine, "reload", settle_sec)
    m = load_pool(name).machine(machine)
    asyncio.run(ssh.wait_ready(m.ssh.host, m.ssh.key_path, 600, user=m.ssh.user,
                               port=m.ssh.port))


def remove(sub, name: str, log=print) -> None:
    """Destroy the experiment (in-band accounts first), then the pool file and vault."""
    if not (root(name) / "terraform").exists():
        raise InputError(f"no CloudLab reuse pool {name!r} ({root(name)})")
    sub.token()
    terraform(root(name) / "terraform", "destroy", "-auto-approve", "-input=false")
    for path in (pool_path(name), pools_dir() / f"{name}.vault.yml",
                 inband.secrets_dir() / f"{name}.vault-pass"):
        path.unlink(missing_ok=True)
    if not lease.read(name):  # no trial holds a machine: the lease directory goes too
        with contextlib.suppress(OSError):
            (lease.lease_dir(name) / ".lock").unlink(missing_ok=True)
            shutil.rmtree(lease.quarantine_dir(name), ignore_errors=True)  # (its machines')
            lease.lease_dir(name).rmdir()
    experiments.forget(experiments.experiment_name(owner_id(name)))
    log(f"cloudlab reuse {name}: experiment terminated, pool removed")


def main(argv: list[str] | None = None) -> int:
    """`reload --pool NAME --machine M`: the reuse pool's `reimage_command`."""
    parser = argparse.ArgumentParser(prog="python -m harness.substrates.cloudlab.reuse")
    parser.add_argument("action", choices=["reload"])
    parser.add_argument("--pool", required=True)
    parser.add_argument("--machine", required=True)
    args = parser.parse_args(argv)
    reload(args.pool, args.machine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
