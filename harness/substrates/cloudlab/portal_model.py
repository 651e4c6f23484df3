"""The local portal's records and their JSON shapes (Experiment, AggregateNode, Profile,
Error, Version, Token) as the CloudLab Portal API describes them
(`../shared/reference/cloudlab-portal-api.md`), and the RSpec v3 manifest of an experiment.

`DOCUMENTED` lists each shape's documented fields; the portal's responses carry exactly
those (tests check every response against it).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from xml.sax.saxutils import quoteattr

AGGREGATE = "urn:publicid:IDN+emulab.net+authority+cm"
DOMAIN = "emulab.net"
DOCUMENTED = {
    "Experiment": {"id", "name", "project", "group", "profile_id", "profile_name",
                   "profile_project", "creator", "updater", "status", "created_at", "start_at",
                   "stop_at", "started_at", "expires_at", "url", "wbstore_id",
                   "repository_url", "repository_refspec", "repository_hash", "bindings",
                   "sshpubkey", "last_snapshot_status", "aggregates"},
    "AggregateStatus": {"urn", "name", "status", "nodes"},
    "AggregateNode": {"urn", "client_id", "hostname", "ipv4", "status", "state", "rawstate",
                      "startup_status"},
    "Profile": {"id", "name", "version", "project", "creator", "created_at", "updated_at",
                "repository_url", "repository_refspec", "repository_hash", "public",
                "project_writable", "current_version", "profile_versions"},
    "ProfileVersion": {"id", "version", "updater", "created_at", "deleted_at", "parameters",
                       "rspec", "script"},
    "Error": {"error", "errors", "code"},
    "Version": {"major", "minor", "patch", "version", "branch", "commit", "build_timestamp"},
    "Token": {"id", "user", "token", "issued_at", "expires_at", "role", "scope",
              "scope_value"},
}


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class PortalNode:
    """One node of an experiment: a profile client_id on a machine of the pool."""

    client_id: str
    machine: str
    ipv4: str
    ssh_port: int = 22
    status: str = "provisioning"
    state: str = "SHUTDOWN"
    hardware_type: str = ""
    disk_image: str = ""

    def hostname(self, exp: Experiment) -> str:
        return f"{self.client_id}.{exp.name}.{exp.project}.{DOMAIN}".lower()

    def to_json(self, exp: Experiment) -> dict:
        return {"urn": f"urn:publicid:IDN+{DOMAIN}+node+{self.machine}",
                "client_id": self.client_id, "hostname": self.hostname(exp),
                "ipv4": self.ipv4, "status": self.status, "state": self.state,
                "rawstate": self.state, "startup_status": "none"}


@dataclass
class Experiment:
    name: str
    project: str
    profile_id: str
    profile_name: str
    profile_project: str
    creator: str
    base_url: str
    group: str = ""
    bindings: dict = field(default_factory=dict)
    sshpubkey: str | None = None
    duration_h: int = 16
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    status: str = "created"
    created: float = field(default_factory=time.time)
    started: float | None = None
    expires: float = 0.0
    nodes: list[PortalNode] = field(default_factory=list)
    request: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.group = self.group or self.project
        self.expires = self.expires or self.created + 3600 * self.duration_h

    def to_json(self) -> dict:
        nodes = [n.to_json(self) for n in self.nodes]
        return {"id": self.id, "name": self.name, "project": self.project, "group": self.group,
                "profile_id": self.profile_id, "profile_name": self.profile_name,
                "profile_project": self.profile_project, "creator": self.creator,
                "updater": self.creator, "status": self.status,
                "created_at": iso(self.created), "start_at": None, "stop_at": None,
                "started_at": iso(self.started), "expires_at": iso(self.expires),
                "url": f"{self.base_url}/portal/status.php?uuid={self.id}",
                "wbstore_id": self.id.replace("-", "")[:16], "repository_url": None,
                "repository_refspec": None, "repository_hash": None,
                "bindings": self.bindings, "sshpubkey": self.sshpubkey,
                "last_snapshot_status": None,
                "aggregates": {AGGREGATE: {"urn": AGGREGATE, "name": "Emulab",
                                           "status": self.status, "nodes": nodes}}}

    def manifest(self) -> str:
        """The RSpec v3 manifest: per node its host, login service and LAN interface."""
        lines = ['<rspec xmlns="http://www.geni.net/resources/rspec/3" type="manifest">']
        for n in self.nodes:
            fqdn = n.hostname(self)
            lines += [f"  <node client_id={quoteattr(n.client_id)} "
                      f"component_id={quoteattr(f'urn:publicid:IDN+{DOMAIN}+node+{n.machine}')} "
                      f"exclusive=\"true\">",
                      f"    <sliver_type name=\"raw\"><disk_image name={quoteattr(n.disk_image)}"
                      f"/></sliver_type>",
                      f"    <hardware_type name={quoteattr(n.hardware_type)}/>",
                      "    <services>",
                      f"      <login authentication=\"ssh-keys\" hostname={quoteattr(n.ipv4)} "
                      f"port=\"{n.ssh_port}\" username=\"root\"/>",
                      "    </services>",
                      f"    <host name={quoteattr(fqdn)} ipv4={quoteattr(n.ipv4)}/>",
                      "  </node>"]
        lines.append("</rspec>")
        return "\n".join(lines) + "\n"


@dataclass
class Profile:
    name: str
    project: str
    script: str
    creator: str
    public: bool = False
    project_writable: bool = False
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: float = field(default_factory=time.time)
    updated: float | None = None
    versions: list[dict] = field(default_factory=list)

    def add_version(self, script: str, rspec: str, parameters: dict) -> None:
        self.script = script
        self.versions.append({"id": str(uuid.uuid4()), "version": len(self.versions) + 1,
                              "updater": self.creator, "created_at": iso(time.time()),
                              "deleted_at": None, "parameters": parameters, "rspec": rspec,
                              "script": script})
        if len(self.versions) > 1:
            self.updated = time.time()

    def to_json(self) -> dict:
        return {"id": self.id, "name": self.name, "version": len(self.versions),
                "project": self.project, "creator": self.creator,
                "created_at": iso(self.created), "updated_at": iso(self.updated),
                "repository_url": None, "repository_refspec": None, "repository_hash": None,
                "public": self.public, "project_writable": self.project_writable,
                "current_version": len(self.versions),
                "profile_versions": {str(v["version"]): v for v in self.versions}}


def error(message: str, code: int | None = None, errors: list[str] | None = None) -> dict:
    out: dict = {"error": message, "code": code}
    if errors:
        out["errors"] = errors
    return out
