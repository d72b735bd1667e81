"""ti_hub/plumbing/lastrun.py: one `ti-hub start` per data dir; what an earlier run left is found and stopped in order."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ti_hub.plumbing import lastrun, pidfile

# a stand-in for a hub, service or proxy: notes when SIGTERM came (or ignores it), then exits
FAKE = """
import signal, sys, time
name, out, ignore = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
def term(*_):
    if ignore:
        return
    with open(out, "a") as f:
        f.write(name + "\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
print("up", flush=True)
while True:
    time.sleep(0.05)
"""


def fake(name: str, out, ignore: bool = False) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", FAKE, name, str(out), "1" if ignore else "0"],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "up\n"
    return p


def test_a_second_start_on_the_same_data_dir_is_refused_with_the_owner_named(tmp_path):
    fd = lastrun.claim(tmp_path)
    try:
        with pytest.raises(lastrun.DataDirBusy) as e:
            lastrun.claim(tmp_path)
        assert f"pid {os.getpid()}" in str(e.value) and str(tmp_path) in str(e.value)
        assert f"kill {os.getpid()}" in str(e.value)
    finally:
        os.close(fd)
    os.close(lastrun.claim(tmp_path))  # released with its holder


def test_stop_order_puts_the_hub_first_and_the_proxy_last():
    files = ["proxy.pid", "service-ti.pid", "ti-hub.pid", "jupyterhub.pid", "service-ti-ssh.pid", "x.txt"]
    assert lastrun.stop_order(files) == [["jupyterhub.pid"], ["service-ti-ssh.pid", "service-ti.pid"],
                                         ["proxy.pid"]]
    assert [lastrun.describe(f) for f in ("jupyterhub.pid", "service-ti.pid", "service-ti-ssh.pid", "proxy.pid")] \
        == ["the hub", "the ti service", "service ti-ssh", "the proxy"]


def test_sweep_stops_leftovers_in_order_and_says_what_it_found(tmp_path, monkeypatch):
    monkeypatch.setattr(lastrun, "GRACE_S", 0.5)
    out = tmp_path / "order"
    procs = {"jupyterhub.pid": fake("hub", out), "service-ti.pid": fake("ti", out),
             "service-ti-ssh.pid": fake("ssh", out, ignore=True), "proxy.pid": fake("proxy", out)}
    try:
        for file, p in procs.items():
            if file == "proxy.pid":
                (tmp_path / file).write_text(f"{p.pid}\n")  # JupyterHub's kind: a bare pid
            else:
                pidfile.write(tmp_path / file, p.pid)
        # a file naming a process long gone is removed without a word
        (tmp_path / "service-old.pid").write_text(pidfile.Record(2**22 - 1, 1, pidfile.boot_id()).text())
        said: list[str] = []
        found = lastrun.sweep(tmp_path, said.append)
        assert [lo.what for lo in found] == ["the hub", "service ti-ssh", "the ti service", "the proxy"]
        assert len(said) == 2 and f"the hub (pid {procs['jupyterhub.pid'].pid})" in said[0]
        assert "killed after the grace period: service ti-ssh" in said[1]
        assert out.read_text().split() == ["hub", "ti", "proxy"]  # ti-ssh ignored SIGTERM: killed
        for p in procs.values():
            assert p.wait(5) is not None
        assert not list(tmp_path.glob("*.pid"))
        assert lastrun.sweep(tmp_path, said.append) == [] and len(said) == 2  # nothing left, nothing said
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


def test_a_pid_taken_over_by_another_process_is_left_alone(tmp_path):
    out = tmp_path / "order"
    stranger = fake("stranger", out)
    try:
        rec = pidfile.record_of(stranger.pid)
        # the file names the stranger's pid with another start time: an earlier process that had this pid
        pidfile.write(tmp_path / "service-ti.pid", stranger.pid)
        (tmp_path / "service-ti.pid").write_text(pidfile.Record(rec.pid, rec.start - 1, rec.boot).text())
        assert lastrun.sweep(tmp_path, print) == []
        time.sleep(0.2)
        assert stranger.poll() is None and not out.exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_a_process_that_cannot_be_stopped_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(lastrun, "GRACE_S", 0.2)
    monkeypatch.setattr(lastrun, "_signal", lambda record, sig: None)  # as with another user's process
    p = fake("ti", tmp_path / "order")
    try:
        pidfile.write(tmp_path / "service-ti.pid", p.pid)
        said: list[str] = []
        lastrun.sweep(tmp_path, said.append, sleep=lambda s: time.sleep(min(s, 0.01)))
        assert said[-1].startswith(f"TiHub: could not stop the ti service (pid {p.pid})")
        assert (tmp_path / "service-ti.pid").exists()  # still names a live process
    finally:
        p.kill()
        p.wait()
