"""The workspace's VS Code entry for jupyter-server-proxy (ti_hub/workspace/vscode.py)."""

from __future__ import annotations

import os
from importlib.metadata import entry_points

import pytest

from ti_hub.workspace import vscode


def test_registered_for_jupyter_server_proxy():
    found = [e for e in entry_points(group="jupyter_serverproxy_servers") if e.name == "vscode"]
    assert [e.value for e in found] == ["ti_hub.workspace.vscode:setup"]
    assert os.path.exists(vscode.setup()["launcher_entry"]["icon_path"])


def test_without_code_server_no_launcher_card_and_the_address_says_why(monkeypatch):
    monkeypatch.delenv(vscode.ENV, raising=False)
    conf = vscode.setup()
    assert conf["launcher_entry"]["enabled"] is False
    with pytest.raises(FileNotFoundError, match="install-code-server.sh"):
        conf["command"]("/tmp/sock")


def test_a_named_file_that_cannot_run_counts_as_none(monkeypatch, tmp_path):
    exe = tmp_path / "code-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o644)
    monkeypatch.setenv(vscode.ENV, str(exe))
    assert vscode.setup()["launcher_entry"]["enabled"] is False


def test_code_server_listens_on_the_proxy_socket_without_a_port(monkeypatch, tmp_path):
    exe = tmp_path / "code-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv(vscode.ENV, str(exe))
    monkeypatch.setenv("CODE_WORKINGDIR", "/home/alice/project")
    conf = vscode.setup()
    assert conf["unix_socket"] is True and conf["launcher_entry"]["enabled"] is True
    argv = conf["command"]("/tmp/x/vscode.sock")
    assert argv[0] == str(exe) and argv[-1] == "/home/alice/project"
    assert argv[argv.index("--socket") + 1] == "/tmp/x/vscode.sock"
    assert argv[argv.index("--socket-mode") + 1] == "0600" and not any(a.startswith("--port") for a in argv)
