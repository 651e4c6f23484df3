"""Terraform: render a trial's root module (main.tf.json) and drive init/apply/destroy.

Every trial is one root module and one state in its own directory. The commands go through
`python-terraform`, whose 2019 release predates Terraform 1.x: its `destroy()` passes the
removed `-force` flag, its `init()` passes `-var-file`/`-parallelism`-style defaults that
`init` rejects, and `apply()` needs `skip_plan=True` to auto-approve. `Terraform1` fixes
those three methods and keeps the rest of the library (command building, state reading).
Providers come from the harness's local filesystem mirror through `TF_CLI_CONFIG_FILE`,
set in the harness's own environment, never in the user's global config.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import python_terraform
from python_terraform import IsFlagged

from harness import owner, substrates
from harness.errors import PreflightError, TerraformError
from harness.paths import TrialPaths, harness_home, provider_mirror, terraform_cli_config


def required_providers(pins: dict[str, dict]) -> dict[str, dict]:
    """required_providers entries (source, version) of a substrate's provider pins."""
    return {k: {"source": v["source"], "version": v["version"]} for k, v in pins.items()}


def _shared(local: str, req: dict) -> bool:
    """Whether a provider may be served once per harness process (its substrate says
    `shared`; ProviderServer); the others start per command."""
    pin = substrates.provider_pins().get(local, {})
    return bool(pin.get("shared")) and pin.get("source") == req.get("source")


def terraform_env() -> None:
    """Point every terraform the harness runs at its own CLI config; no checkpoint calls."""
    os.environ["TF_CLI_CONFIG_FILE"] = str(terraform_cli_config())
    os.environ["TF_IN_AUTOMATION"] = "1"
    os.environ["CHECKPOINT_DISABLE"] = "1"


def terraform_bin() -> str:
    home_bin = Path(os.environ.get("HARNESS_HOME", Path.home() / ".cache" / "harness")) / "bin"
    candidate = home_bin / "terraform"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("terraform")
    if not found:
        raise PreflightError("terraform not found; run scripts/setup.sh (it installs "
                             "Terraform 1.11 from the Go module proxy when missing)")
    return found


def terraform_version() -> str:
    out = subprocess.run([terraform_bin(), "version", "-json"], capture_output=True, text=True,
                         env={**os.environ, "TF_CLI_CONFIG_FILE": str(terraform_cli_config())})
    try:
        return json.loads(out.stdout)["terraform_version"]
    except (ValueError, KeyError) as exc:
        raise PreflightError(f"cannot read the terraform version: {out.stderr.strip()}") from exc


def write_cli_config(path: Path | None = None, mirror: Path | None = None) -> Path:
    """Write the Terraform CLI config: providers only from the local filesystem mirror."""
    path = path or terraform_cli_config()
    mirror = mirror or provider_mirror()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Written by harness: providers come from the local filesystem mirror only.\n"
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{mirror}"\n'
        '    include = ["registry.terraform.io/*/*"]\n  }\n}\n'
        "disable_checkpoint = true\n")
    return path


# Terraform and its providers: collect garbage less often than Go's default 100 (a CLI
# command lives a second or two and spends a good part of its CPU in the collector; the
# shared provider's heap is small). GOGC set by the caller wins.
GO_ENV = {"GOGC": "400"}


class Terraform1(python_terraform.Terraform):
    """python-terraform with init/apply/destroy fixed for Terraform 1.x, and `cmd` taking
    extra environment variables for one command (`env=`)."""

    def cmd(self, cmd, *args, env: dict[str, str] | None = None, started=None, **kwargs):
        """The library's `cmd` (captured output, state re-read on success) with `env` added
        to this command's environment only (os.environ is shared by concurrent trials);
        `started()` is called once the command runs."""
        raise_on_error = kwargs.pop("raise_on_error", False)
        kwargs.pop("capture_output", None)
        cmds = self.generate_cmd_string(cmd, *args, **kwargs)
        with subprocess.Popen(cmds, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=self.working_dir or None,
                              env={**GO_ENV, **os.environ, **(env or {})}) as proc:
            try:
                if started is not None:
                    with contextlib.suppress(Exception):  # a head start, never a reason to stop
                        started()
                stdout, stderr = proc.communicate()
            except BaseException:  # as subprocess.run: the command does not outlive this
                proc.kill()
                raise
        if proc.returncode == 0:
            self.read_state_file()
        self.temp_var_files.clean_up()
        out, err = stdout.decode("utf-8"), stderr.decode("utf-8")
        if proc.returncode != 0 and raise_on_error:
            raise python_terraform.TerraformCommandError(proc.returncode, " ".join(cmds),
                                                         out=out, err=err)
        return proc.returncode, out, err

    def init(self, dir_or_plan=None, **kwargs):
        """`terraform init -input=false -no-color`: no -var-file, -parallelism or -force."""
        return self.cmd("init", input=False, no_color=IsFlagged, **kwargs)

    def apply(self, dir_or_plan=None, **kwargs):
        """`terraform apply -auto-approve -input=false -no-color`."""
        return self.cmd("apply", auto_approve=IsFlagged, input=False, no_color=IsFlagged,
                        **kwargs)

    def destroy(self, dir_or_plan=None, **kwargs):
        """`terraform destroy -auto-approve` (Terraform 1.x removed `-force`)."""
        return self.cmd("destroy", auto_approve=IsFlagged, input=False, no_color=IsFlagged,
                        **kwargs)

    def outputs(self) -> dict[str, Any]:
        """Root outputs: from the state python-terraform re-read after the last command,
        else through `terraform output -json`."""
        state = getattr(self.tfstate, "outputs", None) if self.tfstate else None
        if isinstance(state, dict) and all(isinstance(v, dict) for v in state.values()):
            return {k: v.get("value") for k, v in state.items()}
        code, out, err = self.cmd("output", json=IsFlagged, no_color=IsFlagged)
        if code != 0:
            raise TerraformError("output failed", code, "terraform output", err)
        return {k: v["value"] for k, v in json.loads(out or "{}").items()}


class ProviderServer:
    """One provider plugin process that this harness process's terraform commands attach to.

    Terraform starts a provider 3-4 times per command (schemas, validate, plan, apply), each
    start ~0.1 s for the 76 MB docker provider, and hashes the binary against the lock file
    (~0.07 s). Started once in debug mode (`-debug`: it serves until stopped and prints its
    `TF_REATTACH_PROVIDERS` entry), the same binary from the mirror serves every apply and
    destroy through `TF_REATTACH_PROVIDERS`; `init` still installs it from the mirror into the
    trial's `.terraform` and lock file, so a trial directory works with plain terraform.
    A `sh` holds the read end of a pipe whose write end only this process has: when this
    process exits, however it exits, the shell's `read` returns and it stops the provider.
    Its own log goes nowhere: set HARNESS_TF_SHARED_PROVIDERS=0 to see it under TF_LOG.
    """

    _SCRIPT = '"$0" -debug >"$1" 2>/dev/null & p=$!; read _ || true; kill -TERM "$p"; wait "$p"'

    def __init__(self, binary: Path, start_timeout: float = 15.0):
        self.binary = binary
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.reattach: dict[str, Any] = {}

    def start(self) -> None:
        self.tmpdir = _provider_tmpdir()
        with tempfile.TemporaryDirectory(prefix="hx-tfp-") as tmp:
            out = Path(tmp) / "reattach"
            out.touch()
            self.proc = subprocess.Popen(
                ["sh", "-c", self._SCRIPT, str(self.binary), str(out)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                env={**GO_ENV,
                     **{k: v for k, v in os.environ.items() if not k.startswith("TF_LOG")},
                     **dict.fromkeys(("TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_PROVIDER",
                                      "TF_LOG_SDK_HELPER_SCHEMA"), "OFF"),
                     # its plugin socket goes here, not /tmp: removed by stop(), or by the
                     # next harness process when this one was killed
                     "TMPDIR": str(self.tmpdir)})
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                for line in out.read_text().splitlines():
                    if "TF_REATTACH_PROVIDERS=" in line:
                        self.reattach = json.loads(line.split("=", 1)[1].strip().strip("'"))
                        return
                time.sleep(0.02)
        self.stop()
        raise TerraformError(f"provider {self.binary.name} did not start in debug mode", -1,
                             f"{self.binary} -debug", "")

    def alive(self) -> bool:
        if self.proc is None or self.proc.poll() is not None or not self.reattach:
            return False
        try:
            for entry in self.reattach.values():
                addr = entry["Addr"]
                if addr["Network"] != "unix":
                    return True
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(2)
                    sock.connect(addr["String"])
            return True
        except (OSError, KeyError, TypeError):
            return False

    def stop(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
            self.proc = None
        if getattr(self, "tmpdir", None) is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def _provider_tmpdir() -> Path:
    """`<tmp>/hx-tfp-<pid>/` for this process's provider servers (short: their plugin
    socket path must fit a unix socket name), its owner tag inside; the directories of
    harness processes that are gone are removed on the way."""
    base = Path(tempfile.gettempdir())
    for old in base.glob("hx-tfp-*"):
        tag = old / "owner"
        if old.is_dir() and tag.is_file() and not owner.alive(tag.read_text().strip()):
            shutil.rmtree(old, ignore_errors=True)
    mine = base / f"hx-tfp-{os.getpid()}"
    mine.mkdir(exist_ok=True)
    (mine / "owner").write_text(owner.tag())
    return mine


_servers: dict[str, ProviderServer | None] = {}
_servers_lock = threading.Lock()


def _provider_binary(source: str, version: str) -> Path:
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    ptype = source.rsplit("/", 1)[-1]
    return (provider_mirror() / "registry.terraform.io" / source / version /
            f"{platform.system().lower()}_{arch}" / f"terraform-provider-{ptype}_v{version}")


def shared_provider_env(required: dict[str, dict],
                        config: dict[str, Any] | None = None) -> dict[str, str]:
    """`TF_REATTACH_PROVIDERS` for the shared providers among `required` (a root module's
    required_providers), starting their servers on first use; {} when none can be shared
    (HARNESS_TF_SHARED_PROVIDERS=0, binary not in the mirror, a server that will not start).
    One server per provider *configuration* (the root module's `provider` block, e.g. the
    Docker host): a provider process holds one configuration, which concurrent commands
    for different hosts would overwrite."""
    if os.environ.get("HARNESS_TF_SHARED_PROVIDERS", "1") == "0":
        return {}
    reattach: dict[str, Any] = {}
    for name, req in required.items():
        if not req.get("version") or not req.get("source") or not _shared(name, req):
            continue
        key = f"{req['source']}@{req['version']}"
        if (config or {}).get(name):
            key += "#" + json.dumps(config[name], sort_keys=True)
        with _servers_lock:
            server = _servers.get(key)
            if server is not None and not server.alive():
                server.stop()
                server = None
            if server is None and (key not in _servers or _servers[key] is not None):
                binary = _provider_binary(req["source"], req["version"])
                server = ProviderServer(binary) if binary.is_file() else None
                try:
                    if server is not None:
                        server.start()
                except (OSError, ValueError, TerraformError):
                    server = None  # plain terraform for the rest of this process
                _servers[key] = server
        if server is not None:
            reattach.update(server.reattach)
    return {"TF_REATTACH_PROVIDERS": json.dumps(reattach)} if reattach else {}


def warm_shared_providers(required: dict[str, dict],
                          config: dict[str, Any] | None = None) -> None:
    """Start the shared provider servers among `required` (configured as `config`) in the
    background, so that the first apply finds them running (their ~0.1 s start overlaps
    the trial's preparation)."""
    keys = []
    for n, r in required.items():
        if _shared(n, r):
            key = f"{r.get('source')}@{r.get('version')}"
            if (config or {}).get(n):
                key += "#" + json.dumps(config[n], sort_keys=True)
            keys.append(key)
    if not keys or all(k in _servers for k in keys):
        return

    def start() -> None:
        try:
            shared_provider_env(required, config)
        except Exception:  # the apply tries again and reports
            pass

    threading.Thread(target=start, name="hx-tfp-warm", daemon=True).start()


@atexit.register
def stop_provider_servers() -> None:
    with _servers_lock:
        for server in _servers.values():
            if server is not None:
                server.stop()
        _servers.clear()


def render_root(module_dir: Path, root_dir: Path, variables: dict[str, Any],
                providers: dict[str, dict] | None = None,
                provider_config: dict[str, dict] | None = None) -> dict[str, Any]:
    """The root module as a dict: providers pinned and configured (`provider_config`, from
    the substrate: e.g. the docker engine's endpoint), one `trial` module call, its outputs."""
    providers = providers or {}
    source = os.path.relpath(module_dir, root_dir)
    if not source.startswith("."):
        source = f"./{source}"
    doc: dict[str, Any] = {
        "terraform": {"required_providers": {k: dict(v) for k, v in providers.items()}},
        "module": {"trial": {"source": source, **variables}},
        "output": {
            "nodes": {"value": "${module.trial.nodes}"},
            "network": {"value": "${module.trial.network}"},
        },
    }
    if provider_config:
        doc["provider"] = {k: dict(v) for k, v in provider_config.items()}
    return doc


def write_root(paths: TrialPaths, doc: dict[str, Any]) -> Path:
    paths.terraform.mkdir(parents=True, exist_ok=True)
    tmp = paths.main_tf.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    tmp.replace(paths.main_tf)
    return paths.main_tf


class TrialTerraform:
    """init/apply/outputs/destroy for one trial's root module, with clear errors."""

    def __init__(self, paths: TrialPaths):
        terraform_env()
        self.paths = paths
        self.state_broken = _quarantine_broken_state(paths.terraform / "terraform.tfstate")
        self.tf = Terraform1(working_dir=str(paths.terraform), terraform_bin_path=terraform_bin())
        self.log = paths.terraform / "terraform.log"

    def _log(self, text: str) -> None:
        with self.log.open("a") as fh:
            fh.write(text + "\n")

    def _run(self, what: str, fn, **kwargs) -> str:
        code, out, err = fn(**kwargs)
        self._log(f"$ terraform {what}\n{out or ''}{err or ''}")
        if code != 0:
            raise TerraformError(f"{what} failed in {self.paths.terraform}", code,
                                 f"terraform {what}", _error_summary(err or out or ""))
        return out or ""

    def init(self) -> None:
        """`terraform init`, or a copy of what it wrote for the same inputs before.

        What init writes for a root module (`.terraform/` with modules.json and the
        provider symlinked from the mirror, `.terraform.lock.hcl`) depends only on the module
        sources as written, the modules' files, the provider binaries and versions and the
        terraform binary and CLI config. The first trial with a given set runs init and
        publishes its result under $HARNESS_HOME/terraform-init/<key> (atomic rename; a
        concurrent trial that loses the race keeps its own); later ones copy it (~1 ms
        instead of ~0.1 s: init hashes the 76 MB provider binary). The trial directory ends
        up the same either way, usable with plain terraform."""
        dot = self.paths.terraform / ".terraform"
        lock = self.paths.terraform / ".terraform.lock.hcl"
        if (dot / "modules").exists() and lock.exists():
            return
        key = self._init_key()
        cached = harness_home() / "terraform-init" / key if key else None
        if cached is not None and (cached / ".terraform" / "modules").is_dir():
            try:
                shutil.copytree(cached / ".terraform", dot, symlinks=True, dirs_exist_ok=True)
                if (cached / lock.name).is_file():  # none when no provider is needed
                    shutil.copy2(cached / lock.name, lock)
                self._log(f"$ terraform init\n(copied from {cached})\n")
                return
            except OSError:
                pass  # a damaged cache entry: init for real below
        self._run("init", self.tf.init)
        if cached is not None and not cached.exists():
            tmp = cached.parent / f".{key}.{uuid.uuid4().hex}"
            try:
                shutil.copytree(dot, tmp / ".terraform", symlinks=True)
                if lock.is_file():
                    shutil.copy2(lock, tmp / lock.name)
                os.rename(tmp, cached)
            except OSError:
                pass  # another trial published it first, or the home is read-only
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

    def _init_key(self) -> str | None:
        """A digest of everything `init` reads, or None when the root cannot be read."""
        try:
            doc = json.loads(self.paths.main_tf.read_text())
            h = hashlib.sha256()
            tf_bin = Path(self.tf.terraform_bin_path)
            cli = terraform_cli_config()
            required = doc.get("terraform", {}).get("required_providers", {})
            h.update(json.dumps([str(tf_bin), _stamp(tf_bin), str(cli),
                                 cli.read_text() if cli.exists() else "", required,
                                 {k: v.get("source") for k, v in doc.get("module", {}).items()}],
                                sort_keys=True).encode())
            for name, call in sorted(doc.get("module", {}).items()):
                src = (self.paths.terraform / call["source"]).resolve()
                for f in sorted(p for p in src.rglob("*") if p.is_file()):
                    h.update(f"{name}/{f.relative_to(src)}\0".encode() + f.read_bytes())
            for req in required.values():
                binary = _provider_binary(req["source"], req["version"])
                h.update(f"{binary}{_stamp(binary)}".encode())
            return h.hexdigest()[:32]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _shared(self, what: str, fn, **kwargs) -> str:
        """Run a command against the shared provider servers; when it fails because a
        server went away, run it again the plain way (apply and destroy are idempotent)."""
        try:
            doc = json.loads(self.paths.main_tf.read_text())
            required, config = doc["terraform"]["required_providers"], doc.get("provider")
        except (OSError, ValueError, KeyError, TypeError):
            required, config = {}, None
        env = shared_provider_env(required, config)
        if not env:
            return self._run(what, fn, **kwargs)
        try:
            return self._run(what, fn, env=env, **kwargs)
        except TerraformError:
            if shared_provider_env(required, config) == env:
                raise
            self._log(f"(shared provider gone: {what} again with its own provider)")
            return self._run(what, fn, **kwargs)

    def apply(self, started=None) -> dict[str, Any]:
        """Apply the root module; `started()` once terraform runs (the caller may then
        prepare what comes after apply while it waits)."""
        self.init()
        self._shared("apply", self.tf.apply, started=started)
        return self.tf.outputs()

    def destroy(self) -> None:
        if not self.paths.main_tf.exists():
            return
        self.init()
        self._shared("destroy", self.tf.destroy, refresh=False)

    def has_state(self) -> bool:
        state = self.paths.terraform / "terraform.tfstate"
        if not state.exists():
            return False
        try:
            return bool(json.loads(state.read_text()).get("resources"))
        except ValueError:
            return True


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def _quarantine_broken_state(state: Path) -> bool:
    """A process killed mid-write can leave an empty or partial state file; keep it as
    `terraform.tfstate.broken` (resources are then found by label) and report it."""
    if not state.exists():
        return False
    try:
        json.loads(state.read_text() or "null")["version"]
        return False
    except (ValueError, TypeError, KeyError):
        state.replace(state.with_suffix(".tfstate.broken"))
        return True


def _error_summary(text: str) -> str:
    """The first `Error:` block of terraform's output, flattened to one line."""
    lines = [ln.strip(" │╷╵") for ln in text.splitlines()]
    for i, ln in enumerate(lines):
        if ln.startswith("Error:"):
            block = [x for x in lines[i:i + 8] if x.strip()]
            return " ".join(block)[:600]
    return text.strip()[-600:]
