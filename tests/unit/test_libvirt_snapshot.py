"""Unit tests of snapshot start's pure parts: which parts of a domain key a template, how
the template's XML is made from a trial's, the save-image rewrite, and the start mode.
The real restore runs in tests/integration (libvirt)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from harness.substrates.libvirt import snapshot

TRIAL_XML = """<domain type='qemu'>
  <name>hx-{trial}-node1</name>
  <uuid>{uuid}</uuid>
  <description>harness trial={trial} campaign=c node=node1 owner=o</description>
  <memory unit='KiB'>{kib}</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type><kernel>/img/vmlinuz</kernel></os>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
      <source file='/runs/{trial}/vm/disks/hx-{trial}-node1.qcow2'/>
      <target dev='vda' bus='virtio'/></disk>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/>
      <source file='/runs/{trial}/vm/disks/hx-{trial}-node1-seed.img'/>
      <target dev='vdb' bus='virtio'/></disk>
    <interface type='network'><mac address='{mac}'/>
      <source network='hx-{trial}'/><model type='virtio'/></interface>
    <serial type='pty'><log file='/runs/{trial}/vm/console.log' append='off'/>
      <target port='0'/></serial>
  </devices>
</domain>"""


def trial_xml(trial="t1", uuid="11111111-1111-1111-1111-111111111111",
              mac="52:54:00:aa:bb:cc", kib=1048576) -> str:
    return TRIAL_XML.format(trial=trial, uuid=uuid, mac=mac, kib=kib)


def test_the_shape_ignores_what_is_one_trials_own():
    a = trial_xml()
    b = trial_xml(trial="t2", uuid="22222222-2222-2222-2222-222222222222",
                  mac="52:54:00:11:22:33")
    assert snapshot.shape(a) == snapshot.shape(b)
    assert "t1" not in snapshot.shape(a)


def test_the_shape_keeps_what_a_restore_needs_equal():
    assert snapshot.shape(trial_xml()) != snapshot.shape(trial_xml(kib=2097152))


def test_the_template_has_its_own_name_disks_and_an_unconnected_nic(tmp_path):
    root = ET.fromstring(snapshot.template_xml(trial_xml(), "k" * 16, tmp_path, "own"))
    assert root.findtext("name") == "hx-snap-" + "k" * 16
    assert root.find("uuid") is None
    assert "trial=snap-" in root.findtext("description")
    assert [d.find("source").get("file") for d in root.iterfind("devices/disk")] == [
        str(tmp_path / "disk.qcow2"), str(tmp_path / "seed.img")]
    iface = root.find("devices/interface")
    assert iface.get("type") == "ethernet" and iface.find("source") is None
    assert iface.find("mac").get("address") == snapshot.TEMPLATE_MAC
    assert root.find("devices/serial/log").get("file") == str(tmp_path / "console.log")
    assert snapshot.shape(ET.tostring(root, encoding="unicode")) == snapshot.shape(trial_xml())


def _save_image(path, xml: bytes, cookie: bytes, state: bytes, pad: int = 64) -> None:
    data = xml + b"\0" + cookie + b"\0"
    header = snapshot.HEADER.pack(snapshot.SAVE_MAGIC, 2, len(data) + pad, 1, 0,
                                  len(xml) + 1, *([0] * 14))
    path.write_bytes(header + data + b"\0" * pad + state)


def _read_save_image(path) -> tuple[str, bytes, bytes]:
    raw = path.read_bytes()
    _, _, data_len, running, _, cookie_at, *_ = snapshot.HEADER.unpack(raw[:snapshot.HEADER.size])
    data = raw[snapshot.HEADER.size:snapshot.HEADER.size + data_len]
    xml = data[:cookie_at].split(b"\0")[0].decode()
    cookie = data[cookie_at:].split(b"\0")[0]
    assert running == 1
    return xml, cookie, raw[snapshot.HEADER.size + data_len:]


@pytest.mark.parametrize("new_xml", ["<domain>short</domain>",
                                     "<domain>" + "x" * 500 + "</domain>"])
def test_the_save_image_gets_the_trial_xml_and_keeps_cookie_and_state(tmp_path, new_xml):
    src, dest = tmp_path / "t.save", tmp_path / "n.save"
    state = bytes(range(256)) * 4000
    _save_image(src, b"<domain>template</domain>", b"<cookie/>", state)
    snapshot.write_save_image(src, dest, new_xml)
    assert _read_save_image(dest) == (new_xml, b"<cookie/>", state)


def test_a_file_that_is_no_save_image_is_refused(tmp_path):
    bad = tmp_path / "bad.save"
    bad.write_bytes(b"\0" * 200)
    with pytest.raises(snapshot.SnapshotError, match="not a libvirt save image"):
        snapshot.write_save_image(bad, tmp_path / "out", "<domain/>")


@pytest.mark.parametrize(("env", "node", "mode"), [
    ("", None, "snapshot"), ("", "snapshot", "snapshot"), ("", "cold", "cold"),
    ("cold", None, "cold"), ("COLD", "snapshot", "cold"), ("snapshot", "cold", "cold")])
def test_start_mode(monkeypatch, env, node, mode):
    monkeypatch.setenv("HARNESS_VM_START", env)
    assert snapshot.effective_mode(node)[0] == mode


class FakeDom:
    def __init__(self):
        self.active, self.created, self.destroyed = False, 0, 0

    def isActive(self):  # noqa: N802 (libvirt's names)
        return self.active

    def XMLDesc(self, flags=0):  # noqa: N802
        return trial_xml()

    def create(self):
        self.active, self.created = True, self.created + 1

    def destroy(self):
        self.active, self.destroyed = False, self.destroyed + 1


class FakeConn:
    def __init__(self, dom):
        self.dom = dom

    def lookupByName(self, name):  # noqa: N802
        return self.dom

    def close(self):
        pass


def _args(tmp_path, mode="snapshot"):
    return snapshot.argparse.Namespace(
        uri="qemu:///system", domain="hx-t1-node1", overlay=str(tmp_path / "o.qcow2"),
        base=str(tmp_path / "base.qcow2"), mac="52:54:00:aa:bb:cc", ip="10.0.0.10", mode=mode,
        owner="", data_mb=[], timeout=30.0, record=None)


def test_a_failed_restore_boots_the_node_cold_and_says_why(tmp_path, monkeypatch):
    dom = FakeDom()
    rebased = []
    monkeypatch.setattr(snapshot.host, "connect", lambda uri: FakeConn(dom))
    monkeypatch.setattr(snapshot, "build_template", lambda *a, **k: (tmp_path / "k", False))

    def restore(conn, d, *a, **k):
        d.active = True  # restored, then the fix-up failed
        raise snapshot.SnapshotError("guest fix-up exited 3: no DHCP lease")

    monkeypatch.setattr(snapshot, "restore", restore)
    monkeypatch.setattr(snapshot, "_overlay_on",
                        lambda backing, overlay: rebased.append((backing, overlay)))
    logged = []
    record = snapshot.start(_args(tmp_path), log=logged.append)
    assert record["mode"] == "cold" and record["fallback"] is True
    assert "no DHCP lease" in record["reason"] and "booting it cold" in logged[0]
    assert dom.destroyed == 1 and dom.created == 1 and rebased == [(tmp_path / "base.qcow2",
                                                                 tmp_path / "o.qcow2")]


def test_cold_mode_neither_builds_nor_restores(tmp_path, monkeypatch):
    dom = FakeDom()
    monkeypatch.setenv("HARNESS_VM_START", "cold")
    monkeypatch.setattr(snapshot.host, "connect", lambda uri: FakeConn(dom))
    monkeypatch.setattr(snapshot, "build_template", lambda *a, **k: pytest.fail("built"))
    record = snapshot.start(_args(tmp_path))
    assert record["mode"] == "cold" and "HARNESS_VM_START" in record["reason"]
    assert dom.created == 1
    assert snapshot.start(_args(tmp_path))["mode"] == "running"  # idempotent
    assert dom.created == 1


def test_the_seed_disks_files_reach_the_clone_with_a_new_identity(tmp_path):
    """`node_files` reads the node's seed disk (as make-disks.sh makes it) and adds what
    must be new in every clone; two calls give two host keys and machine-ids."""
    import io
    import shutil
    import subprocess
    import tarfile

    if not (shutil.which("mkfs.ext4") and shutil.which("debugfs")):
        pytest.skip("e2fsprogs is not installed")
    src = tmp_path / "seed"
    (src / "harness").mkdir(parents=True)
    (src / "authorized_keys").write_text("ssh-ed25519 AAAA trial\n")
    (src / "hostname").write_text("node1\n")
    (src / "hosts").write_text("127.0.0.1\tlocalhost\n10.0.0.10\tnode1\n")
    (src / "harness" / "cluster-info").write_text("node1=10.0.0.10\n")
    image = tmp_path / "seed.img"
    subprocess.run(["truncate", "-s", "4M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-L", "HXSEED", "-d",
                    str(src), str(image), "4M"], check=True)

    def members(blob: bytes) -> dict[str, tuple[int, bytes | None]]:
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            return {m.name: (m.mode, tar.extractfile(m).read() if m.isfile() else None)
                    for m in tar.getmembers()}

    one, two = members(snapshot.node_files(image)), members(snapshot.node_files(image))
    assert one["root/.ssh"] == (0o700, None)
    assert one["root/.ssh/authorized_keys"] == (0o600, b"ssh-ed25519 AAAA trial\n")
    assert one["etc/hostname"][1] == b"node1\n" and one["etc/hosts"][1].endswith(b"node1\n")
    assert one["etc/harness/cluster-info"] == (0o644, b"node1=10.0.0.10\n")
    key, pub = one["etc/ssh/ssh_host_ed25519_key"], one["etc/ssh/ssh_host_ed25519_key.pub"]
    assert key[0] == 0o600 and b"OPENSSH PRIVATE KEY" in key[1]
    assert pub[1].startswith(b"ssh-ed25519 ") and pub[1].strip().endswith(b"root@node1")
    assert len(one["etc/machine-id"][1]) == 33 and len(one["run/harness-fixup/entropy"][1]) == 512
    for name in ("etc/ssh/ssh_host_ed25519_key", "etc/machine-id", "run/harness-fixup/entropy"):
        assert one[name][1] != two[name][1], name
