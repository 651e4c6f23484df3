"""The emulated machines' saved first boot: when a reimage may restore it, and how the
BMC's power-on command uses the marker a reimage leaves."""

from __future__ import annotations

import json

import libvirt
import pytest

from harness.substrates.metal import booted


class FakeConn:
    def __init__(self, fail_restore: bool = False):
        self.fail_restore, self.restored = fail_restore, []

    def getLibVersion(self):
        return 9000000

    def getVersion(self):
        return 7002000

    def restore(self, path):
        if self.fail_restore:
            raise libvirt.libvirtError("cannot restore: incompatible")
        self.restored.append(path)


class FakeDomain:
    def __init__(self):
        self.created = 0

    def isActive(self):
        return self.created > 0

    def create(self):
        self.created += 1


def saved(tmp_path, conn, base, **change):
    f = booted.files(tmp_path, "node0")
    f["save"].write_bytes(b"state")
    f["disk"].write_bytes(b"saved disk")
    f["meta"].write_text(json.dumps({**booted._needs(conn, base), **change}))
    return f


@pytest.fixture
def base(tmp_path):
    path = tmp_path / "base.qcow2"
    path.write_bytes(b"image")
    return path


def test_a_matching_save_is_restorable_and_what_differs_is_named(tmp_path, base, monkeypatch):
    conn = FakeConn()
    monkeypatch.delenv("HARNESS_VM_START", raising=False)
    assert booted.unusable(conn, tmp_path, "node0", base) == "no saved first boot"
    saved(tmp_path, conn, base)
    assert booted.unusable(conn, tmp_path, "node0", base) is None
    saved(tmp_path, conn, base, qemu=6002000, base_mtime=1)
    assert booted.unusable(conn, tmp_path, "node0", base) == \
        "saved with another base_mtime, qemu"
    booted.files(tmp_path, "node0")["meta"].write_text("{not json")
    assert booted.unusable(conn, tmp_path, "node0", base).startswith(str(tmp_path))
    saved(tmp_path, conn, base)
    monkeypatch.setenv("HARNESS_VM_START", "cold")
    assert booted.unusable(conn, tmp_path, "node0", base) == "HARNESS_VM_START=cold"


def test_stage_puts_the_saved_disk_back_and_the_marker_restores_once(tmp_path, base):
    conn = FakeConn()
    f = saved(tmp_path, conn, base)
    disk = tmp_path / "node0.qcow2"
    disk.write_bytes(b"a trial's writes")
    booted.stage(tmp_path, "node0", disk)
    assert disk.read_bytes() == b"saved disk" and f["marker"].exists()
    dom = FakeDomain()
    assert booted.power_on(dom, conn, f["save"], f["marker"]) == "restored"
    assert conn.restored == [str(f["save"])] and dom.created == 0 and not f["marker"].exists()
    assert booted.power_on(dom, conn, f["save"], f["marker"]) == "booted"  # a later power-on
    assert dom.created == 1 and conn.restored == [str(f["save"])]


def test_a_failed_restore_boots_and_drop_removes_the_save(tmp_path, base, capsys):
    conn = FakeConn(fail_restore=True)
    f = saved(tmp_path, conn, base)
    f["marker"].touch()
    dom = FakeDomain()
    assert booted.power_on(dom, conn, f["save"], f["marker"]) == "booted"
    assert dom.created == 1 and "booting instead" in capsys.readouterr().out
    booted.drop(tmp_path, "node0")
    assert not any(p.exists() for p in booted.files(tmp_path, "node0").values())


def test_a_new_pool_keeps_off_the_bmc_ports_of_the_other_pools(tmp_path, monkeypatch):
    """Two emulated pools live at once in CI: a BMC VM-channel port one pool keeps in its
    config is never chosen by another, running or not (its QEMU would reach the wrong BMC)."""
    from harness.substrates.metal import emulate

    monkeypatch.setenv("HARNESS_HOME", str(tmp_path))
    for pool, port in (("a", 17123), ("b", 17456)):
        conf = tmp_path / "secrets" / "pools" / pool / "node0.lan.conf"
        conf.parent.mkdir(parents=True)
        conf.write_text(f"  serial 15 127.0.0.1 {port} codec VM\n  user 2 true x y\n")
    assert emulate._ports_of_other_pools("a") == {17456}
    assert emulate._ports_of_other_pools("c") == {17123, 17456}
    taken = emulate._ports_of_other_pools("c")
    assert emulate.free_tcp_port(123, taken) not in {17123, 17456}
