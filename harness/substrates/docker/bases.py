"""Local stand-ins for common public base images, built on the Debian base on first use.

No container registry is reachable; `image_overrides` maps `python:*` and `golang:*` here
(`harness.config`), to images that carry what their namesakes carry:

- `harness/python:3.11`: Debian's Python 3.11 with pip, venv and setuptools from the
  Debian mirror; `python` and `pip` on PATH (`/usr/local/bin`, as in the official image)
  and `pip install` allowed system-wide (no EXTERNALLY-MANAGED marker,
  `PIP_BREAK_SYSTEM_PACKAGES=1`);
- `harness/golang:<version>`: the Go toolchain the Go module proxy serves as the module
  `golang.org/toolchain@v0.0.1-go<version>.linux-<arch>` (the newest release of the
  version asked for; the zip is cached under `$HARNESS_HOME/cache/go-toolchain`), in
  `/usr/local/go`, with the official image's GOPATH and PATH, plus gcc, make, git and
  pkg-config from the Debian mirror.

Each is built once (`ensure`) and labelled with what it holds (`harness.stand-in`). Both
trust the certificate authorities this host's administrator added to its own trust store
(`/usr/local/share/ca-certificates`, `HARNESS_HOST_CA_DIR`): where egress goes through a
TLS-inspecting proxy, `pip install` inside them reaches PyPI as the host does.
"""

from __future__ import annotations

import hashlib
import io
import os
import platform
import re
import shutil
import tempfile
import threading
import urllib.request
import zipfile
from pathlib import Path

from harness.config import GOLANG_BASE, LOCAL_BASE, PYTHON_BASE
from harness.errors import PreflightError
from harness.paths import harness_home
from harness.substrates.docker.engine import BUILD_NETWORK
from harness.substrates.docker.engine.lite import image_or_none

GO_PROXY = os.environ.get("HARNESS_GO_PROXY", "https://proxy.golang.org")
TOOLCHAIN = "golang.org/toolchain"
_LOCK = threading.Lock()
APT = ("apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
       "--no-install-recommends {} && rm -rf /var/lib/apt/lists/*")
HOST_CA_DIR = Path(os.environ.get("HARNESS_HOST_CA_DIR", "/usr/local/share/ca-certificates"))
CA_STEP = ("COPY ca/ /usr/local/share/ca-certificates/harness-host/\n"
           "RUN update-ca-certificates >/dev/null\n")
PYTHON_DOCKERFILE = f"""FROM {LOCAL_BASE}
@CA@
RUN {APT.format("python3 python3-pip python3-venv python3-setuptools python3-wheel")} \\
 && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \\
 && ln -sf /usr/bin/python3 /usr/local/bin/python && ln -sf /usr/bin/pip3 /usr/local/bin/pip
ENV LANG=C.UTF-8 PIP_BREAK_SYSTEM_PACKAGES=1 PYTHON_VERSION=3.11
LABEL harness.stand-in="python:3.11 (Debian bookworm's python3, pip, venv)"
"""
GOLANG_DOCKERFILE = """FROM {base}
@CA@
RUN {apt}
COPY go/ /usr/local/go/
ENV GOLANG_VERSION={version} GOPATH=/go GOTOOLCHAIN=local \\
    PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN mkdir -p /go/src /go/bin && chmod -R 1777 /go && /usr/local/go/bin/go version
LABEL harness.stand-in="golang:{version} (module {module}, zip sha256 {sha})"
"""


def is_stand_in(ref: str) -> bool:
    return ref == PYTHON_BASE or ref.startswith(GOLANG_BASE.split("{")[0])


def ensure(client, ref: str, log=print) -> str:
    """The id of stand-in `ref`, built now when it is missing."""
    with _LOCK:
        found = image_or_none(client, ref)
        if found is not None:
            return found.id
        if image_or_none(client, LOCAL_BASE) is None:
            raise PreflightError(f"{LOCAL_BASE} missing (the stand-in {ref} is built on it); "
                                 "run `harness image build --kind docker`")
        cas = host_cas()
        with tempfile.TemporaryDirectory(prefix="hx-base-") as tmp:
            context = Path(tmp)
            (context / "ca").mkdir()
            for name, data in cas.items():
                (context / "ca" / name).write_bytes(data)
            if ref == PYTHON_BASE:
                log(f"building {ref} (Debian's Python with pip and venv) from the Debian mirror")
                text = PYTHON_DOCKERFILE
            else:
                release, data = go_toolchain(ref.split(":", 1)[1], log)
                log(f"building {ref} (Go {release} from the Go module proxy)")
                text = GOLANG_DOCKERFILE.format(
                    base=LOCAL_BASE, apt=APT.format("gcc libc6-dev make pkg-config git"),
                    version=release, module=f"{TOOLCHAIN}@{toolchain_version(release)}",
                    sha=hashlib.sha256(data).hexdigest()[:16])
                unpack_toolchain(data, context / "go")
            (context / "Dockerfile").write_text(text.replace("@CA@\n", CA_STEP if cas else ""))
            return _build(client, ref, path=tmp)


def host_cas() -> dict[str, bytes]:
    """The CA certificates added to this host's trust store (file name -> PEM)."""
    if not HOST_CA_DIR.is_dir():
        return {}
    found = {}
    for p in sorted(HOST_CA_DIR.rglob("*.crt")):
        data = p.read_bytes()
        if b"BEGIN CERTIFICATE" in data and len(data) < 1_000_000:
            found[p.name] = data
    return found


def _build(client, ref: str, path: str) -> str:
    import docker

    try:
        image, _ = client.images.build(path=path, tag=ref, rm=True, forcerm=True,
                                       network_mode=BUILD_NETWORK, timeout=1800,
                                       labels={"harness.base": "stand-in"})
    except docker.errors.BuildError as exc:
        lines = [str(c.get("stream", c.get("error", ""))).strip() for c in exc.build_log if c]
        tail = " | ".join(x for x in lines[-4:] if x)
        raise PreflightError(f"building the local stand-in {ref} failed: {exc.msg}; last "
                             f"output: {tail[-400:]}") from exc
    return image.id


def go_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        machine, machine)


def toolchain_version(release: str) -> str:
    """The toolchain module's version for Go `release` (e.g. 1.22.5)."""
    return f"v0.0.1-go{release}.linux-{go_arch()}"


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=120) as resp:  # noqa: S310 (https only)
            return resp.read()
    except OSError as exc:
        raise PreflightError(f"cannot fetch {url} ({exc}); the Go toolchain of a golang:* "
                             "base comes from the Go module proxy (HARNESS_GO_PROXY)") from exc


def pick_release(listing: str, want: str) -> str:
    """The newest stable Go release in the proxy's version list that `want` names
    (`1.22` -> the newest 1.22.x, `1.22.5` exactly, `latest` -> the newest)."""
    suffix = f".linux-{go_arch()}"
    found = []
    for line in listing.split():
        m = re.fullmatch(r"v0\.0\.1-go(\d+)\.(\d+)(?:\.(\d+))?" + re.escape(suffix), line)
        if m:
            found.append(tuple(int(x or 0) for x in m.groups()) + (line,))
    if want != "latest":
        parts = tuple(int(x) for x in want.split("."))
        found = [f for f in found if f[:len(parts)] == parts]
    if not found:
        raise PreflightError(f"the Go module proxy serves no Go {want} toolchain for "
                             f"linux-{go_arch()} (map golang:{want} to another image with "
                             "image_overrides)")
    best = max(found)[3]
    return best[len("v0.0.1-go"):-len(suffix)]


def go_toolchain(want: str, log=print) -> tuple[str, bytes]:
    """(release, toolchain zip) for Go `want`, from the cache or the Go module proxy."""
    cache = harness_home() / "cache" / "go-toolchain"
    cached = sorted(cache.glob(f"go{want}*.zip")) if want.count(".") == 2 else []
    if cached:
        return cached[-1].name[2:-len(".zip")], cached[-1].read_bytes()
    listing = _get(f"{GO_PROXY}/{TOOLCHAIN}/@v/list").decode()
    release = pick_release(listing, want)
    path = cache / f"go{release}.zip"
    if not path.exists():
        log(f"downloading Go {release} from {GO_PROXY}")
        data = _get(f"{GO_PROXY}/{TOOLCHAIN}/@v/{toolchain_version(release)}.zip")
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(path)
    return release, path.read_bytes()


def unpack_toolchain(data: bytes, dest: Path) -> None:
    """The toolchain zip's tree (under its `module@version/` prefix) into `dest`, with the
    files' modes (the Go tools are executables)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            name = info.filename.split("/", 2)
            if len(name) < 3 or not name[2] or info.is_dir():
                continue
            rel = Path(name[2])
            if rel.is_absolute() or ".." in rel.parts:
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            # module zips record no modes: the go command marks bin/ and pkg/tool/ executable
            tool = rel.parts[0] == "bin" or rel.parts[:2] == ("pkg", "tool")
            mode = (info.external_attr >> 16) & 0o777
            target.chmod(0o755 if tool or mode & 0o111 else 0o644)
