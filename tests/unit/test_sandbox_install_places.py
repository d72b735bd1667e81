"""Issue 31, pure parts: a TiHub installed under /tmp is shown in the sandbox through traversable directories,
installs no sandbox can show are refused with the reason, and user code's PATH is the platform's, in login
shells too."""

from __future__ import annotations

import subprocess

import pytest

from ti_hub.backends.local import sandbox

ENTRIES = (("usr", None), ("bin", "usr/bin"), ("etc", None))


def argv_of(read_only: tuple[str, ...], tmp: str = "/srv/tmp/0", **kw) -> str:
    plan = sandbox.Plan(binds=(sandbox.Bind("/srv/home/ann", "/home/ann", False),), read_only=read_only,
                        entries=ENTRIES, tmp=tmp, cwd="/home/ann")
    return " ".join(sandbox.bwrap_argv("bwrap", plan, privileged=True, python="/tmp/t/venv/bin/python", spec_fd=5,
                                       **kw))


def test_an_install_under_tmp_is_reached_through_directories_made_after_the_private_tmp():
    joined = argv_of(("/tmp/t/venv", "/tmp/t/src/ti_hub", "/var/tmp/x/y"))
    tmp = joined.index("--bind /srv/tmp/0 /tmp --bind /srv/tmp/0 /var/tmp --chmod 1777 /tmp")
    made = [joined.index(f"--perms 0755 --dir {d} ") for d in ("/tmp/t", "/tmp/t/src", "/var/tmp/x")]
    shown = joined.index("--ro-bind /tmp/t/venv /tmp/t/venv")
    assert tmp < min(made) and made == sorted(made) and max(made) < shown  # /tmp, then the way, then the venv
    assert "--dir /tmp " not in joined and "--dir /tmp/t/venv " not in joined
    # a memory-backed /tmp is 1777 already; the way is made in it all the same
    joined = argv_of(("/tmp/t/venv",), tmp="")
    assert "--chmod" not in joined
    assert joined.index("--perms 1777 --tmpfs /tmp") < joined.index("--perms 0755 --dir /tmp/t ")


@pytest.mark.parametrize("path", ["/tmp", "/var/tmp", "/var", "/dev", "/proc", "/sys"])
def test_an_install_that_would_replace_the_sandboxs_own_places_is_refused(path):
    assert path in sandbox.hidden_by(["/opt/ok", path]) and "install TiHub" in sandbox.hidden_by([path])
    with pytest.raises(sandbox.SandboxError, match="makes its own"):
        argv_of((path,))
    assert sandbox.hidden_by(["/tmp/t/venv", "/var/lib/py", "/devices"]) == ""


def test_user_path_is_the_platforms_bin_then_the_systems():
    assert sandbox.user_path(["/tmp/t/venv/bin", "/usr/bin"]) == \
        "/tmp/t/venv/bin:/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin"
    assert sandbox.user_path([]) == ":".join(sandbox.SYSTEM_PATH)


def test_the_sandboxs_profile_puts_the_platforms_bin_first_after_the_hosts_resets_path(tmp_path):
    debian = 'if [ "$(id -u)" -eq 0 ]; then PATH="/usr/sbin:/usr/bin"; else PATH="/usr/local/bin:/usr/bin:/bin"; fi\n' \
             "export PATH\n"
    profile = tmp_path / "profile"
    profile.write_text(sandbox.profile_text(debian, ["/tmp/it's here/bin"]))
    out = subprocess.run(["/bin/sh", "-c", f'. "{profile}"; printf %s "$PATH"'], env={"PATH": "/opt/leak/bin"},
                         capture_output=True, text=True, check=True).stdout
    assert out.split(":")[0] == "/tmp/it's here/bin" and "/opt/leak/bin" not in out
    assert sandbox.profile_text(debian, []) == debian
    assert "--perms 0644 --ro-bind-data 9 /etc/profile" in argv_of((), profile_fd=9)
