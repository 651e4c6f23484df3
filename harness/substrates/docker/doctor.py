"""`harness doctor` checks of the docker substrate: its engine, the firewall, the base."""

from __future__ import annotations

from harness.substrates import firewall
from harness.substrates.base import SETUP, Check
from harness.substrates.docker import base_image, engine


def _engine(host: str | None = None, name: str = "docker engine",
            fix: str = f"sudo {SETUP} (it starts the harness's own Docker engine)",
            tls=None) -> Check:
    """Reachable, with the hardening the threat model relies on (userns-remap, private
    cgroup namespaces, the hx-runc runtime)."""
    try:
        st = engine.status(host, tls)
    except Exception as exc:
        return Check(name, "FAIL", f"not reachable: {exc}"[:200], fix)
    hardened = not engine.hardening_gaps(st)
    detail = (f"harness engine {st['version']} at {st['host']}: userns-remap "
              f"{'on' if st['userns'] else 'OFF'}, cgroupns "
              f"{'private' if st['cgroupns'] else 'OFF'}, runtime {st['runtime']}")
    return Check(name, "PASS" if hardened else "FAIL", detail, "" if hardened else fix)


def host_checks(host_name: str, url: str, remote: bool, tls=None) -> list[Check]:
    """`harness doctor --hosts`: one host's engine; a remote one gets task images loaded
    from this machine's engine on first use, so its base image is checked here."""
    fix = ("on that host: run scripts/setup.sh (the harness engine), or fix its docker: "
           "endpoint in the hosts file; ssh:// needs key-based login, tcp:// a client "
           "certificate of the engine's CA")
    out = [_engine(url, f"{host_name}: docker engine", fix, tls)]
    if remote and out[0].status == "PASS":
        out.append(Check(f"{host_name}: images", "PASS",
                         "task images are built here and loaded there on first use"))
    return out


def checks() -> list[Check]:
    out = [_engine()]
    if out[0].status == "FAIL" and out[0].detail.startswith("not reachable"):
        return out
    ok, how = firewall.loaded()
    out.append(Check("trial firewall", "PASS" if ok else "FAIL", how,
                     "" if ok else f"sudo {SETUP}"))
    ok, desc = base_image.docker_base_status()
    out.append(Check("docker base image", "PASS" if ok else "FAIL", desc,
                     "" if ok else "harness image build --kind docker"))
    try:
        import ansible_collections.community.docker as cd

        out.append(Check("collection community.docker", "PASS", list(cd.__path__)[0]))
    except ImportError:
        out.append(Check("collection community.docker", "FAIL", "not installed",
                         "pip install ansible (Galaxy is not used)"))
    return out
