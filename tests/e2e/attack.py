"""ATTACK: what a hostile user's job tries (tests/e2e/test_isolation.py copies this into the user's home and runs it
as a job). It reports, as one JSON line, what each attempt got; the test decides what must have failed."""

import json
import os
import signal

targets = json.loads(os.environ.get("TARGETS", "{}"))
seen = {"read": {}, "write": {}, "signal": {}}

for path in targets.get("read", []):
    try:
        with open(path, "rb") as f:
            f.read(16)
        seen["read"][path] = "read"
    except OSError as e:
        seen["read"][path] = e.strerror

for path in targets.get("write", []):
    try:
        with open(path, "w") as f:
            f.write("pwned")
        seen["write"][path] = "written"
    except OSError as e:
        seen["write"][path] = e.strerror

for pid in targets.get("signal", []):
    try:
        os.kill(int(pid), signal.SIGKILL)
        seen["signal"][str(pid)] = "killed"
    except ProcessLookupError:
        seen["signal"][str(pid)] = "no such process"
    except OSError as e:
        seen["signal"][str(pid)] = e.strerror

secret = targets.get("secret", "")[::-1].encode()
victim = targets.get("victim", "")[::-1].encode() or b"\0"
environs, victims, count = [], [], 0
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    count += 1
    try:
        with open(f"/proc/{entry}/environ", "rb") as f:
            if secret and secret in f.read():
                environs.append(int(entry))
    except OSError:
        pass
    try:
        with open(f"/proc/{entry}/cmdline", "rb") as f:
            if victim in f.read():
                victims.append(int(entry))
    except OSError:
        pass
seen.update(environ_with_secret=environs, victim_processes=victims, processes=count, uid=os.getuid())
with open("/proc/self/status") as f:
    status = dict(line.split(":", 1) for line in f if ":" in line)
seen["cap_eff"] = int(status["CapEff"].strip(), 16)
seen["no_new_privs"] = int(status.get("NoNewPrivs", "0").strip())
print(json.dumps(seen))
