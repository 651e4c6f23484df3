"""A stand-in "outside" for egress tests (the network test-double rule: hosts in network
namespaces the test creates): two HTTP servers A and B behind a veth pair whose host end
is the trial's only extra uplink (config.yaml `egress_uplinks`), a "neighbour" behind an
`hx*` interface standing in for another trial, and a listener on the host for the host
itself. Needs root."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


class Outside:
    """Namespaces `out` (A=.2, B=.3 on 198.18.K.0/29, behind uplink `tvo<pid>`) and `nbr`
    (198.19.K.2, behind `hxq<pid>`, an interface the firewall treats as a trial's)."""

    def __init__(self, root: Path):
        tag = str(os.getpid() % 100000)
        k = 20 + os.getpid() % 200
        self.ns, self.nbr = f"hxtest-out-{tag}", f"hxtest-nbr-{tag}"
        self.uplink, self.fake_trial = f"tvo{tag}", f"hxq{tag}"
        self.a, self.b, self.gw = f"198.18.{k}.2", f"198.18.{k}.3", f"198.18.{k}.1"
        self.neighbour = f"198.19.{k}.2"
        www = root / "www"
        www.mkdir(parents=True)
        (www / "index.html").write_text("outside\n")
        self.procs = []
        for ns, host_if, host_ip, addrs in (
                (self.ns, self.uplink, f"{self.gw}/29", [f"{self.a}/29", f"{self.b}/29"]),
                (self.nbr, self.fake_trial, f"198.19.{k}.1/30", [f"{self.neighbour}/30"])):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0",
               "netns", ns)
            sh("ip", "addr", "add", host_ip, "dev", host_if)
            sh("ip", "link", "set", host_if, "up")
            for addr in addrs:
                sh("ip", "-n", ns, "addr", "add", addr, "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "route", "add", "default", "via", host_ip.split("/")[0])
            self.procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "python3", "-m", "http.server", "8080",
                 "--bind", "0.0.0.0", "--directory", str(www)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        for ns, host_if in ((self.ns, self.uplink), (self.nbr, self.fake_trial)):
            subprocess.run(["ip", "link", "del", host_if], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["nft", "delete", "element", "inet", "harness", "uplinks",
                        f'{{ "{self.uplink}" }}'], capture_output=True)
