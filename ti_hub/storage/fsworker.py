"""Work on a user's files as that user: ``python -I -S fsworker.py UID GID OP FD [ARGS...]`` (``userfs`` runs it).

The platform (root) opens the volume's directory itself, under parents only it can enter, and hands the open
directory to this process, which first becomes UID:GID (no supplementary group, no capability left,
no_new_privs; -1 -1 keeps the caller's, for an unprivileged platform) and has an empty environment. It
starts as root, like ``dropexec.py``, because the interpreter may live where only root can reach (under
/root); it reads nothing of the user's before the switch. From there every path component is opened relative to its
parent's descriptor with ``O_NOFOLLOW`` (and one component at a time, so no ``..`` or link in the middle is
ever walked): a job of the same user that swaps a directory or a file for a symbolic link while this runs
(``renameat2(RENAME_EXCHANGE)``) makes an entry fail or get copied as a link, never read through. Even a walk
that went wrong could reach only what that uid may read, which is none of the platform's files.

Operations, each answering one JSON object per line on stdout (progress lines first for ``copy``):
- ``usage FD MAX_FILES``: ``{"bytes": N, "files": N}`` (lstat sizes, stops counting after MAX_FILES files);
- ``browse FD REL LIMIT``: one directory's entries (or one entry) below the volume, ``{"error": ...}`` when a
  component is missing, a link or not a directory;
- ``copy SRC_FD DST_FD``: copy the tree (regular files, directories, links as links; FIFOs, sockets and devices
  are skipped, set-id bits dropped) into the empty directory DST_FD; ``{"total": N}`` first, then
  ``{"done": N}`` about every half second, then ``{"ok": true, "bytes": N, "files": N, "skipped": N}``.

Standard library only, no ``site`` (``-S``) and isolated mode (``-I``), like ``dropexec.py``: nothing a user can
write is imported. Exit status 0 with an ``{"error": ...}`` line is a refusal to show the user; any other
status is a failure for the admin's log.
"""

import ctypes
import errno
import json
import os
import stat
import sys
import time

PR_SET_NO_NEW_PRIVS = 38

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in for a file between the lstat and the open must not hang the walk
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
MAX_DEPTH = 256  # one open descriptor per level: deeper trees are refused, not half-copied
CHUNK = 64 << 20
PROGRESS_EVERY = 0.5


class Refused(Exception):
    """What the user should read (a path that is not there, a file they cannot read). ``code``: "missing",
    "invalid" (a path that may not be asked for) or "refused"."""

    def __init__(self, message, code="refused"):
        super().__init__(message)
        self.code = code


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def open_dir(name, dir_fd):
    return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def entries(dir_fd):
    """(name, lstat) of each entry of the open directory, sorted by name; entries gone meanwhile are left out."""
    out = []
    with os.scandir(dir_fd) as it:
        for e in it:
            try:
                out.append((e.name, e.stat(follow_symlinks=False)))
            except OSError:
                continue
    out.sort(key=lambda x: x[0])
    return out


def walk_sizes(dir_fd, max_files, depth=0, seen=None):
    """Bytes and files below the open directory, by lstat, never through a link."""
    total, files = 0, 0
    if depth > MAX_DEPTH:
        return total, files
    for name, st in entries(dir_fd):
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = open_dir(name, dir_fd)
            except OSError:
                continue  # gone, swapped for a link, or not readable: not ours to count
            try:
                b, n = walk_sizes(sub, max_files - files, depth + 1)
            finally:
                os.close(sub)
            total, files = total + b, files + n
        else:
            total += st.st_size
            files += 1
        if files >= max_files:
            break
    return total, files


def usage(fd, max_files):
    total, files = walk_sizes(fd, max(1, max_files))
    say({"bytes": total, "files": files})


def kind_of(mode):
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "link"
    return "file" if stat.S_ISREG(mode) else "other"


def browse(fd, rel, limit):
    parts = [p for p in rel.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise Refused("path must stay inside the volume (no '.' or '..')", "invalid")
    here, opened = fd, []
    try:
        for i, part in enumerate(parts):
            shown = "/".join(parts[:i + 1])
            try:
                st = os.stat(part, dir_fd=here, follow_symlinks=False)
            except FileNotFoundError:
                raise Refused(f"{shown} does not exist in this volume", "missing") from None
            if not stat.S_ISDIR(st.st_mode):
                if i < len(parts) - 1:  # what the volume holds decides (a 409), not the path asked for
                    raise Refused(f"{shown} is not a directory")
                return {"path": rel.strip("/"), "type": kind_of(st.st_mode), "size": st.st_size, "entries": []}
            try:
                here = open_dir(part, here)
            except OSError as e:
                # swapped for a link (ELOOP, ENOTDIR) or not readable by the user
                raise Refused(f"{shown} cannot be opened: {os.strerror(e.errno)}") from None
            opened.append(here)
        base = "/".join(parts)
        out = []
        for name, st in entries(here)[:limit]:
            out.append({"name": name, "type": "dir" if stat.S_ISDIR(st.st_mode) else "file", "size": st.st_size,
                        "modified": st.st_mtime, "path": f"{base}/{name}" if base else name})
        return {"path": base, "type": "dir", "entries": out}
    finally:
        for f in opened:
            os.close(f)


class Copier:
    def __init__(self):
        self.done = self.files = self.skipped = 0
        self.last = time.monotonic()

    def progress(self, force=False):
        now = time.monotonic()
        if force or now - self.last >= PROGRESS_EVERY:
            self.last = now
            say({"done": self.done})

    def tree(self, src, dst, where="", depth=0):
        if depth > MAX_DEPTH:
            raise Refused(f"{where or '/'} is nested more than {MAX_DEPTH} directories deep")
        for name, st in entries(src):
            path = f"{where}/{name}" if where else name
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                self.directory(src, dst, name, path, depth)
            elif stat.S_ISREG(mode):
                self.file(src, dst, name, path)
            elif stat.S_ISLNK(mode):
                try:
                    target = os.readlink(name, dir_fd=src)
                except OSError:
                    self.skipped += 1  # swapped for something else meanwhile
                    continue
                os.symlink(target, name, dir_fd=dst)  # the link itself: what it points to is never read
            else:
                self.skipped += 1  # FIFOs, sockets and devices hold no data to keep
            self.progress()

    def directory(self, src, dst, name, path, depth):
        try:
            s = open_dir(name, src)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                self.skipped += 1  # swapped for a link or a file while we looked: not followed
                return
            raise Refused(f"cannot read {path}: {os.strerror(e.errno)}") from None
        try:
            st = os.fstat(s)
            os.mkdir(name, 0o700, dir_fd=dst)
            d = open_dir(name, dst)
            try:
                self.tree(s, d, path, depth + 1)
                os.fchmod(d, stat.S_IMODE(st.st_mode) & 0o1777)
                os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(d)
        finally:
            os.close(s)

    def file(self, src, dst, name, path):
        try:
            s = os.open(name, FILE_FLAGS, dir_fd=src)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOENT, errno.ENXIO):
                self.skipped += 1  # now a link, gone, or a FIFO with no writer
                return
            raise Refused(f"cannot read {path}: {os.strerror(e.errno)}") from None
        try:
            st = os.fstat(s)
            if not stat.S_ISREG(st.st_mode):
                self.skipped += 1
                return
            d = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                        dir_fd=dst)
            try:
                self.data(s, d)
                os.fchmod(d, stat.S_IMODE(st.st_mode) & 0o777)  # no set-id bit survives a copy
                os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(d)
            self.files += 1
        finally:
            os.close(s)

    def data(self, s, d):
        fast = hasattr(os, "copy_file_range")
        while True:
            try:
                n = os.copy_file_range(s, d, CHUNK) if fast else os.sendfile(d, s, None, CHUNK)
            except OSError as e:
                if fast and e.errno in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    fast = False  # across file systems on older kernels, or a file system without it
                    continue
                raise
            if n == 0:
                return
            self.done += n
            self.progress()


def copy(src, dst):
    total, _ = walk_sizes(src, 1 << 62)
    say({"total": total})
    c = Copier()
    c.tree(src, dst)
    c.progress(force=True)
    say({"ok": True, "bytes": c.done, "files": c.files, "skipped": c.skipped})


def become(uid, gid):
    """Drop to uid:gid for good (setresuid clears every capability), or stay as we are for -1."""
    if uid >= 0:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if uid != 0 and 0 in os.getresuid():
            raise SystemExit("fsworker: still root after the switch")
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit("fsworker: could not set no_new_privs")


def main(argv):
    os.umask(0o077)
    if len(argv) < 4:
        say({"error": "usage: fsworker.py UID GID usage|browse|copy FD ..."})
        return 2
    become(int(argv[0]), int(argv[1]))
    op, fd, argv = argv[2], int(argv[3]), argv[2:]
    try:
        if op == "usage":
            usage(fd, int(argv[2]))
        elif op == "browse":
            say(browse(fd, argv[2], int(argv[3])))
        elif op == "copy":
            copy(fd, int(argv[2]))
        else:
            say({"error": f"unknown operation {op!r}"})
            return 2
    except Refused as e:
        say({"error": str(e), "code": e.code})
    except OSError as e:
        # ENOSPC, EDQUOT, EMFILE...: the user's to read too, without the platform's paths
        say({"error": f"{os.strerror(e.errno) if e.errno else e}"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
