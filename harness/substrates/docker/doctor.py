"""`harness doctor` checks of the docker substrate: its engine, the firewall, the base."""

from __future__ import annotations

from harness.substrates import firewall
from harness.substrates.base import SETUP, Check
from harness.substrates.docker import base_image, engine


def checks() -> list[Check]:
    try:
        st = engine.status()
    except Exception as exc:
        return [Check("docker engine", "FAIL", f"not reachable: {exc}"[:200],
                      f"sudo {SETUP} (it starts the harness's own Docker engine)")]
    hardened = st["userns"] and st["cgroupns"] and st["runtime"] == "hx-runc"
    detail = (f"harness engine {st['version']} at {st['host']}: userns-remap "
              f"{'on' if st['userns'] else 'OFF'}, cgroupns "
              f"{'private' if st['cgroupns'] else 'OFF'}, runtime {st['runtime']}")
    out = [Check("docker engine", "PASS" if hardened else "FAIL", detail,
                 "" if hardened else f"sudo {SETUP}")]
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
