"""Per-task Docker images: the task's Dockerfile built on a local base, cached by content.

Foreign `FROM` lines (ubuntu:24.04, debian:bookworm, ...) are mapped to local bases through
`Settings.image_overrides`; no registry is contacted for them. An image is tagged
`hx-task/<task>:<content hash>` and reused while the task's environment/ is unchanged.
A task's `environment/setup.sh` runs once per (base image, task) as the build's last step
(`RUN bash setup.sh`, so it is cached with the image; no systemd runs during a build:
enable units there, start them in bootstrap.sh); bootstrap.sh runs every trial.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import threading
from pathlib import Path

from harness.config import Settings
from harness.errors import InputError, PreflightError
from harness.substrates.docker import bases, harbor
from harness.substrates.docker.base_image import DOCKER_BASE
from harness.substrates.docker.engine import BUILD_NETWORK
from harness.substrates.docker.engine.lite import image_or_none

_BUILD_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
SETUP_STEP = ("\nCOPY setup.sh /tmp/harness-setup.sh\n"
              "RUN bash /tmp/harness-setup.sh && rm -f /tmp/harness-setup.sh\n")
FROM_RE = re.compile(r"^(\s*FROM\s+)(?:--platform=\S+\s+)?(\S+)(.*)$", re.IGNORECASE | re.MULTILINE)


def base_refs(dockerfile: str) -> list[str]:
    """The images a Dockerfile's FROM lines name (not its own stages)."""
    stages, refs = set(), []
    for m in FROM_RE.finditer(dockerfile):
        ref, alias = m.group(2), re.search(r"\bAS\s+(\S+)", m.group(3), re.IGNORECASE)
        if ref not in stages:
            refs.append(ref)
        if alias:
            stages.add(alias.group(1))
    return refs


def rewrite_from(dockerfile: str, settings: Settings) -> str:
    """Replace every FROM image by its local override (stage names are left alone)."""
    stages: set[str] = set()

    def sub(m: re.Match) -> str:
        ref, rest = m.group(2), m.group(3)
        alias = re.search(r"\bAS\s+(\S+)", rest, re.IGNORECASE)
        mapped = ref if ref in stages else settings.map_image(ref)
        if alias:
            stages.add(alias.group(1))
        return f"{m.group(1)}{mapped}{rest}"

    return FROM_RE.sub(sub, dockerfile)


def context_tar(env_dir: Path, dockerfile_text: str) -> tuple[bytes, str]:
    """A build context tarball of environment/ with the rewritten Dockerfile; and its hash."""
    buf = io.BytesIO()
    h = hashlib.sha256()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for p in sorted(env_dir.rglob("*")):
            rel = p.relative_to(env_dir).as_posix()
            if rel == "Dockerfile" or not p.is_file():
                continue
            tar.add(p, arcname=rel)
            h.update(rel.encode() + b"\0" + p.read_bytes())
        data = dockerfile_text.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        h.update(b"Dockerfile\0" + data)
    return buf.getvalue(), h.hexdigest()


def image_tag(client, task, settings: Settings, build_bases=None
              ) -> tuple[str, bytes, Path | None]:
    """(tag, build context, Dockerfile) of the task's image; the tag hashes the context and
    the ids of its local base images, so it changes whenever either does. A local stand-in
    base (`bases`: python, golang) that is missing is built when `build_bases` (the log) is
    given, else named as pending (a plan builds nothing)."""
    base = settings.map_image(task.base_image) if task.base_image else DOCKER_BASE
    dockerfile = task.dockerfile
    text = rewrite_from(dockerfile.read_text(), settings) if dockerfile else f"FROM {base}\n"
    if task.env_file("setup.sh") is not None:
        text = text.rstrip("\n") + SETUP_STEP
    tar_bytes, digest = context_tar(task.path / "environment", text)
    for ref in base_refs(text):  # every FROM image but the file's own stages (`FROM alpine`
        if ref == "scratch":      # too: an unmapped name is refused here, not in the build)
            continue
        found = image_or_none(client, ref)
        if found is not None:
            digest += found.id
            continue
        if bases.is_stand_in(ref):
            digest += (bases.ensure(client, ref, build_bases) if build_bases is not None
                       else f"pending:{ref}")
            continue
        hint = ("run `harness image build --kind docker`" if ref == DOCKER_BASE else
                "map it to a local base with image_overrides in config.yaml or the "
                "campaign file")
        raise PreflightError(f"{dockerfile or 'base_image'}: base image {ref!r} is not "
                             f"present locally and no registry is used; {hint}")
    tag = f"hx-task/{_slug(task.name)}:{hashlib.sha256(digest.encode()).hexdigest()[:12]}"
    if task.format == "harbor":  # the layer that boots it as Harbor runs it (`harbor`),
        layer = hashlib.sha256(harbor.recipe(task.env_vars).encode()).hexdigest()[:8]
        tag = f"{tag}-{layer}"   # over the image the Dockerfile builds (`dockerfile_tag`)
    return tag, tar_bytes, dockerfile


def dockerfile_tag(tag: str) -> str:
    """The tag of the image a Harbor task's Dockerfile builds, under its layer's `tag`
    (rebuilt only when the Dockerfile's context or bases change, not the layer)."""
    return tag.rsplit("-", 1)[0] + "-dockerfile"


def task_image(client, task, settings: Settings, log=print) -> str:
    """Build (or reuse) the task's image and return its id."""
    tag, tar_bytes, dockerfile = image_tag(client, task, settings, build_bases=log)
    with _LOCKS_GUARD:
        lock = _BUILD_LOCKS.setdefault(tag, threading.Lock())
    with lock:  # concurrent trials of one task build its image once
        found = image_or_none(client, tag)
        if found is not None:
            return found.id
        if task.format != "harbor":
            return _build(client, task, tag, tar_bytes, dockerfile, settings, log)
        raw = dockerfile_tag(tag)  # the task's own image, as its Dockerfile builds it
        found = image_or_none(client, raw)
        raw_id = found.id if found is not None else _build(client, task, raw, tar_bytes,
                                                           dockerfile, settings, log)
        return harbor.build_layer(client, raw_id, tag, task.env_vars,
                                  int(task.env.build_timeout_sec))


def _build(client, task, tag: str, tar_bytes: bytes, dockerfile: Path | None,
           settings: Settings, log) -> str:
    import docker

    base = settings.map_image(task.base_image) if task.base_image else DOCKER_BASE
    log(f"building image {tag} from {dockerfile or base}")
    try:
        image, _ = client.images.build(
            fileobj=io.BytesIO(tar_bytes), custom_context=True, tag=tag, rm=True, forcerm=True,
            network_mode=BUILD_NETWORK,
            labels={"harness.task-image": task.name}, timeout=int(task.env.build_timeout_sec))
    except docker.errors.BuildError as exc:
        lines = [str(c.get("stream", c.get("error", ""))).strip() for c in exc.build_log if c]
        tail = " | ".join(x for x in lines[-4:] if x)
        where = failing_file(task, dockerfile, lines)
        raise InputError(f"docker build failed: {exc.msg}; last output: {tail[-400:]}",
                         file=where) from exc
    return image.id


def failing_file(task, dockerfile: Path | None, log_lines: list[str]) -> str:
    """`file:line` of what failed in a build: environment/setup.sh (its line, as bash
    reported it) when the setup step failed, else the Dockerfile line of the last step."""
    steps = [x.split(":", 1)[1].strip() for x in log_lines if re.match(r"Step \d+/\d+ :", x)]
    setup = task.path / "environment" / "setup.sh"
    if steps and "harness-setup.sh" in steps[-1]:
        found = [m.group(1) for x in log_lines
                 if (m := re.search(r"harness-setup\.sh: line (\d+)", x))]
        return f"{setup}:{found[-1]}" if found else str(setup)
    if dockerfile is None:
        return str(task.path / "task.toml")
    if steps:
        for number, text in enumerate(dockerfile.read_text().splitlines(), 1):
            if text.strip() and text.strip() == steps[-1]:
                return f"{dockerfile}:{number}"
    return str(dockerfile)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-.") or "task"


def ship(source, dest, ref: str, host: str, log=print) -> bool:
    """Make image `ref` (built or found on the engine `source`) present on the engine
    `dest` (another host): `docker save` streamed into `docker load` over the two engines'
    APIs, once per host and image id (what `dest` holds is the cache; a lock per host and
    ref keeps concurrent trials from loading it twice). True when it was loaded now."""
    import docker

    image_id = source.api.inspect_image(ref)["Id"]
    with _lock(f"ship:{host}:{ref}"):
        try:
            if dest.api.inspect_image(ref)["Id"] == image_id:
                return False
        except docker.errors.ImageNotFound:
            pass
        log(f"loading {ref} onto host {host}")
        stream = source.api.get_image(ref, chunk_size=1 << 20)
        for _ in dest.api.load_image(stream):
            pass
        if dest.api.inspect_image(ref)["Id"] != image_id:
            raise PreflightError(f"loading {ref} onto host {host} gave another image id")
        return True


def _lock(key: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _BUILD_LOCKS.setdefault(key, threading.Lock())
