"""Issue 30: two TiHub instances on one host never hand the same uid to different people. The host's registry of
instances' uid ranges (ti_hub/ops/uidranges.py) and the allocation's view of the host's uids
(ti_hub/ops/unixids.py: HostUids)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ti_hub.ops import uidranges as R
from ti_hub.ops.unixids import HostUids, process_uids

REPO = str(Path(__file__).resolve().parents[2])


@pytest.fixture
def dirs(tmp_path):
    out = {}
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        out[name] = str(tmp_path / name)
    return out


def test_an_overlapping_range_of_a_live_instance_is_refused(tmp_path, dirs):
    reg = tmp_path / "reg" / "uid-ranges.json"  # its directory is made
    R.register(reg, dirs["a"], 900_000, 999_999)
    before = reg.read_text()
    with pytest.raises(R.RangeTaken) as e:
        R.register(reg, dirs["b"], 950_000, 1_050_000)
    msg = str(e.value)
    # names the other instance's data dir, its range, ours, and the setting to change
    assert dirs["a"] in msg and "900000-999999" in msg and "950000-1050000" in msg, msg
    assert "c.TiService.unix_uid_range" in msg and "[1000000, 1100000]" in msg, msg
    assert reg.read_text() == before  # nothing changed
    for first, last in ((899_000, 900_000), (999_999, 999_999), (1, 10_000_000)):  # the edges overlap too
        with pytest.raises(R.RangeTaken):
            R.register(reg, dirs["b"], first, last)
    # a range of its own is fine
    R.register(reg, dirs["b"], 1_000_000, 1_099_999)
    assert R.entries(reg) == [R.Entry(dirs["a"], 900_000, 999_999), R.Entry(dirs["b"], 1_000_000, 1_099_999)]
    assert oct(reg.stat().st_mode & 0o777) == "0o644"


def test_the_same_data_dir_registers_again(tmp_path, dirs):
    reg = tmp_path / "uid-ranges.json"
    R.register(reg, dirs["a"], 900_000, 999_999)
    R.register(reg, dirs["a"], 900_000, 999_999)  # a restart
    R.register(reg, dirs["a"] + "/", 800_000, 850_000)  # a new range, the same directory however it is spelt
    assert R.entries(reg) == [R.Entry(dirs["a"], 800_000, 850_000)]
    R.register(reg, dirs["b"], 900_000, 999_999)  # what a gave up is free
    link = tmp_path / "link-to-a"
    link.symlink_to(dirs["a"])
    R.register(reg, link, 800_000, 850_000)  # keyed by the real path
    assert [e.data_dir for e in R.entries(reg)] == [dirs["a"], dirs["b"]]


def test_entries_of_removed_data_dirs_are_dropped(tmp_path, dirs):
    reg = tmp_path / "uid-ranges.json"
    R.register(reg, dirs["a"], 900_000, 999_999)
    R.register(reg, dirs["c"], 500_000, 500_999)
    os.rmdir(dirs["a"])
    dropped = R.register(reg, dirs["b"], 900_000, 999_999)
    assert dropped == [R.Entry(dirs["a"], 900_000, 999_999)]
    assert R.entries(reg) == [R.Entry(dirs["b"], 900_000, 999_999), R.Entry(dirs["c"], 500_000, 500_999)]


def test_a_damaged_registry_refuses_rather_than_forgets(tmp_path, dirs):
    reg = tmp_path / "uid-ranges.json"
    for text in ("{not json", '{"instances": []}', '{"instances": {"/x": {"first": "a"}}}', "[]"):
        reg.write_text(text)
        with pytest.raises(R.RangeTaken, match="damaged"):
            R.register(reg, dirs["a"], 900_000, 999_999)
        assert reg.read_text() == text
    reg.write_text("")  # an empty file is an empty registry
    R.register(reg, dirs["a"], 900_000, 999_999)
    assert json.loads(reg.read_text())["instances"][dirs["a"]]["first"] == 900_000


REGISTER = textwrap.dedent("""
    import sys, time
    from ti_hub.ops import uidranges as R
    reg, data, first, last, go = sys.argv[1:]
    from pathlib import Path
    while not Path(go).exists():
        time.sleep(0.005)
    try:
        R.register(reg, data, int(first), int(last))
        print("ok")
    except R.RangeTaken as e:
        print("refused", e)
""")


def _racers(tmp_path, ranges) -> list[str]:
    """Processes registering at the same moment (they wait for one file), each its own data dir; their words."""
    reg, go = tmp_path / "uid-ranges.json", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": REPO}
    procs = []
    for i, (first, last) in enumerate(ranges):
        d = tmp_path / f"race{i}"
        d.mkdir()
        procs.append(subprocess.Popen([sys.executable, "-c", REGISTER, str(reg), str(d), str(first), str(last),
                                       str(go)], env=env, stdout=subprocess.PIPE, text=True))
    time.sleep(1.0)  # every process has started and waits
    go.touch()
    return [p.communicate(timeout=60)[0].strip() for p in procs]


def test_concurrent_registrations_are_serialised_by_the_lock(tmp_path):
    # the same range at once: exactly one instance gets it
    said = _racers(tmp_path, [(900_000, 999_999)] * 4)
    assert sorted(s.split()[0] for s in said) == ["ok", "refused", "refused", "refused"], said
    assert len(R.entries(tmp_path / "uid-ranges.json")) == 1


def test_concurrent_registrations_lose_no_entry(tmp_path):
    said = _racers(tmp_path, [(100_000 * i, 100_000 * i + 99_999) for i in range(1, 7)])
    assert said == ["ok"] * 6, said
    assert len(R.entries(tmp_path / "uid-ranges.json")) == 6


def test_a_held_lock_makes_a_registration_wait(tmp_path, dirs):
    import fcntl

    reg = tmp_path / "uid-ranges.json"
    fd = os.open(str(reg) + ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    go = tmp_path / "go"
    go.touch()
    p = subprocess.Popen([sys.executable, "-c", REGISTER, str(reg), dirs["a"], "900000", "999999", str(go)],
                         env={**os.environ, "PYTHONPATH": REPO}, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        assert p.poll() is None and not reg.exists()
    finally:
        os.close(fd)
    assert p.communicate(timeout=30)[0].strip() == "ok"
    assert R.entries(reg) == [R.Entry(dirs["a"], 900_000, 999_999)]


def _svc(tmp_path, shares_host_network=True, uid_range=(900_000, 999_999)):
    return SimpleNamespace(backend=SimpleNamespace(shares_host_network=shares_host_network),
                           unix_uid_range=list(uid_range), unix_uid_registry=str(tmp_path / "reg.json"),
                           data_dir=str(tmp_path), log=SimpleNamespace(info=lambda *a: None))


def test_the_service_registers_only_as_root_with_host_uids(tmp_path, monkeypatch):
    from ti_hub.service import startup

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    startup.claim_uid_range(_svc(tmp_path))
    assert not (tmp_path / "reg.json").exists()  # without root no uid is switched
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    startup.claim_uid_range(_svc(tmp_path, shares_host_network=False))
    assert not (tmp_path / "reg.json").exists()  # Kubernetes: uids live in pods
    startup.claim_uid_range(_svc(tmp_path))
    assert R.entries(tmp_path / "reg.json") == [R.Entry(str(tmp_path), 900_000, 999_999)]
    other = tmp_path / "other"
    other.mkdir()
    svc = _svc(other)
    svc.unix_uid_registry = str(tmp_path / "reg.json")
    with pytest.raises(SystemExit, match=r"not started: another TiHub instance .* c\.TiService\.unix_uid_range"):
        startup.claim_uid_range(svc)


def test_the_registry_path_is_a_setting_with_an_environment_override(tmp_path, monkeypatch):
    from ti_hub.service.app import TiService

    monkeypatch.delenv(R.ENV, raising=False)
    assert TiService().unix_uid_registry == "/var/lib/ti-hub/uid-ranges.json"
    monkeypatch.setenv(R.ENV, str(tmp_path / "r.json"))
    assert TiService().unix_uid_registry == str(tmp_path / "r.json")
    assert "overlap" in TiService.class_traits()["unix_uid_registry"].help


# -- allocation: uids the host uses ----------------------------------------------------------------------------
def _fake_proc(tmp_path, uids: dict[str, str]) -> Path:
    proc = tmp_path / "proc"
    for pid, line in uids.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "status").write_text(f"Name:\tx\nUmask:\t0022\nState:\tS\n{line}\nGid:\t0\t0\t0\t0\n")
    (proc / "self").mkdir()  # not a pid
    (proc / "42").mkdir()  # a process that ended while being read: no status
    return proc


def test_process_uids_reads_every_uid_of_every_process(tmp_path):
    proc = _fake_proc(tmp_path, {"1": "Uid:\t0\t0\t0\t0", "7": "Uid:\t900000\t900003\t900000\t900000",
                                 "9": "Uid:\t900001\t900001\t900001\t900001"})
    assert process_uids(proc) == {0, 900_000, 900_001, 900_003}
    assert process_uids(tmp_path / "nothing") == set()
    assert os.geteuid() in process_uids()  # this very process, on the real /proc


def test_host_uids_skips_accounts_and_process_owners_reading_proc_once(tmp_path):
    proc = _fake_proc(tmp_path, {"7": "Uid:\t900001\t900001\t900001\t900001"})
    asked = []
    has = HostUids(proc, in_passwd=lambda uid: asked.append(uid) or uid == 900_000)
    assert has(900_000) and has(900_001) and not has(900_002)
    (proc / "8").mkdir()
    (proc / "8" / "status").write_text("Uid:\t900002\t900002\t900002\t900002\n")
    assert not has(900_002)  # read once per allocation
    assert HostUids(proc, in_passwd=lambda uid: False)(900_002)
    assert HostUids(in_passwd=lambda uid: False)(os.geteuid())
