"""WS3 on the job page: the SSH command of a running job or workspace, with a button that copies it.

Pure: who is shown a command (``wants_command``), which one (``command_for``, as GET /ssh/command writes it) and
the markup. The command is plain text, so it is there with script off; the button is ``hidden`` until the script
(``SCRIPT``, sent under the response's CSP nonce: ``PageHandler.inline_script``) shows it. Where the browser
refuses the clipboard (http on an address other than localhost, or a denied permission) the script puts the
command in a read-only field, selected, as the hub's home page does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..domain import states as st
from ..ssh.logins import ssh_command
from .html import Safe, el


def wants_command(viewer: str, job: Mapping[str, Any], gateway_on: bool) -> bool:
    """All but the job's SSH switch (read apart): the gateway is on, the job runs, and the viewer owns it. A login
    is always its owner's (ops/jobssh.py): an admin looking at another user's job is shown no command."""
    return gateway_on and job.get("owner") == viewer and job.get("status") == st.RUNNING


def command_for(job: Mapping[str, Any], host: str, port: int) -> str:
    """A job's instance 0 (its login names the instance); a workspace has one, named by the workspace alone."""
    instance = None if job["kind"] == "workspace" else 0
    return ssh_command(job["owner"], job["name"], host, port, instance)


# our own source (no value of the page's in it): it reads the command from the page
SCRIPT = """(function () {
  var box = document.getElementById("job-ssh");
  var code = document.getElementById("job-ssh-command");
  var button = document.getElementById("job-ssh-copy");
  var said = document.getElementById("job-ssh-said");
  if (!box || !code || !button || !said) {
    return;
  }
  var command = code.textContent;
  function fallback() {
    var field = document.getElementById("job-ssh-field");
    if (!field) {
      field = document.createElement("input");
      field.id = "job-ssh-field";
      field.className = "ti-ssh-field";
      field.readOnly = true;
      field.setAttribute("aria-label", "SSH command");
      said.after(field);
    }
    field.value = command;
    field.size = Math.min(command.length + 2, 100);
    said.textContent = "Press Ctrl+C to copy:";
    field.focus();
    field.select();
  }
  button.addEventListener("click", function () {
    said.textContent = "";
    if (!navigator.clipboard || !window.isSecureContext) {
      fallback();
      return;
    }
    navigator.clipboard.writeText(command).then(function () {
      said.textContent = "Copied";
    }, fallback);
  });
  button.hidden = false;
})();"""


def block(command: str, kind: str, script: Safe) -> Safe:
    """The section: the command as text, the (hidden until scripted) button, a status line, the script."""
    return el("section",
              el("h2", "SSH", id="job-ssh-title"),
              el("p", f"Connect to this {kind} with the SSH key you registered (`ti key add`):"),
              el("p", el("code", command, id="job-ssh-command"), " ",
                 el("button", "Copy SSH command", type="button", id="job-ssh-copy", hidden=True), " ",
                 el("span", "", id="job-ssh-said", role="status"), class_="ti-ssh"),
              script, id="job-ssh", aria_labelledby="job-ssh-title")


__all__ = ["SCRIPT", "block", "command_for", "wants_command"]
