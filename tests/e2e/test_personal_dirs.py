"""STO8 on the embedded platform: every user's work directory (/mnt/USER) and archive directory (/archives/USER)
are mounted into every job and workspace, persist between them, and are nobody else's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tihub_client import processes_with_env, wait

pytestmark = pytest.mark.e2e


def run(session, name: str, command: str) -> str:
    j = session.ok("POST", "/jobs", json={"name": name, "plan": "cpu-small", "image": "python-cpu",
                                          "command": command})
    done = session.wait_job(j["id"], timeout=120)
    text = session.ok("GET", f"/jobs/{j['id']}/logs")["text"]
    assert done["status"] == "completed", text
    return text


def test_work_and_archive_directories_persist_and_are_private(hub, new_user):
    alice, bob = new_user("pdira"), new_user("pdirb")
    work, archive = f"/mnt/{alice.name}", f"/archives/{alice.name}"
    # shown to the user, with the variables their code reads
    assert alice.ok("GET", "/quota")["personal"] == {"work": work, "archive": archive}
    out = run(alice, "pdir-write", f'echo kept > "$TI_WORK_DIR/w.txt" && echo old > {archive}/a.txt && '
                                   'echo "$TI_WORK_DIR $TI_ARCHIVE_DIR"')
    assert f"{work} {archive}" in out
    # a later job finds both files: the directories outlive the job that wrote them
    assert run(alice, "pdir-read", f"cat {work}/w.txt {archive}/a.txt").split() == ["kept", "old"]
    # on the host, under the user data directory, the user's own and nobody else's
    for kind, name in (("work", "w.txt"), ("archives", "a.txt")):
        host = Path(hub.data_dir) / "personal" / kind / alice.name
        assert (host / name).is_file()
        if os.geteuid() == 0:
            st = host.stat()
            assert st.st_mode & 0o777 == 0o700 and st.st_uid != 0
    # another user sees only their own directories, never alice's
    seen = run(bob, "pdir-peek", f"ls /mnt /archives; cat {work}/w.txt 2>/dev/null || echo no-such-file")
    assert alice.name not in seen and seen.count(bob.name) == 2 and "no-such-file" in seen
    # a volume cannot be mounted over a personal directory
    alice.ok("POST", "/volumes", json={"name": "over", "kind": "filesystem", "capacity_gib": 1})
    r = alice.api("POST", "/jobs", json={"name": "pdir-clash", "plan": "cpu-small", "image": "python-cpu",
                                         "command": "true", "volumes": [{"volume": "over", "mount_path": work}]})
    assert r.status_code == 400 and r.json()["field"] == "volumes[0].mount_path", r.text
    assert "work directory" in r.json()["detail"]


def test_a_workspace_mounts_the_owners_directories(hub, new_user):
    u = new_user("pdirws")
    r = u.hub_api("POST", f"/users/{u.name}/servers/pdir-box", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    u.wait_server("pdir-box")
    try:
        found = wait(lambda: processes_with_env(JUPYTERHUB_USER=u.name, TI_WORKSPACE="pdir-box"), 30,
                     "the workspace process")
        pid, env = next(iter(found.items()))
        assert (env["TI_WORK_DIR"], env["TI_ARCHIVE_DIR"]) == (f"/mnt/{u.name}", f"/archives/{u.name}")
        # inside the workspace's sandbox (its own root), the host directories are bound at those paths
        (Path(hub.data_dir) / "personal" / "work" / u.name / "from-host.txt").write_text("hi")
        assert Path(f"/proc/{pid}/root/mnt/{u.name}/from-host.txt").read_text() == "hi"
        assert Path(f"/proc/{pid}/root/archives/{u.name}").is_dir()
    finally:
        u.hub_api("DELETE", f"/users/{u.name}/servers/pdir-box")
        u.wait_server("pdir-box", ready=False)
