"""Directories user code may write, made by the platform (root) for the user's own uid, and nothing else.

Every directory here lives under the data directory, which only the platform can enter; user code reaches a
directory only where a sandbox binds it. The platform never follows a link a user could have placed: the
directories are opened with ``O_NOFOLLOW`` and changed through their file descriptors, and adopting an old
tree (files made before TiHub ran each user as their own uid) walks it with ``os.fwalk``, which never
leaves it through a symbolic link, even one swapped in during the walk.
"""

from __future__ import annotations

import errno
import os
import struct

# POSIX ACL extended attribute (linux/posix_acl_xattr.h): version, then (tag, perm, id) entries
ACL_XATTR_VERSION = 2
ACL_USER_OBJ, ACL_GROUP_OBJ, ACL_OTHER = 0x01, 0x04, 0x20
ACL_UNDEFINED_ID = 0xFFFFFFFF


def open_dir(path: str) -> int:
    """The directory at ``path`` opened without following a link put in its place (ELOOP, ENOTDIR)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def ensure_dir(path: str, uid: int, gid: int, mode: int = 0o700, *, adopt: bool = False) -> None:
    """``path`` exists as a real directory owned by ``uid:gid`` with ``mode``; its parents are the platform's.

    ``adopt``: a directory the platform itself owns (made before TiHub switched uids) is handed over with
    everything in it, once.
    """
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o700, exist_ok=True)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    fd = open_dir(path)  # refuses a symbolic link in place of the directory
    try:
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != (uid, gid):
            if adopt and st.st_uid == os.geteuid() and uid != os.geteuid():
                adopt_tree(fd, uid, gid)
            os.fchown(fd, uid, gid)
        if st.st_mode & 0o7777 != mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def private_dir(path: str, uid: int, gid: int) -> None:
    """A user's own directory (a personal work or archive directory) below parents only the platform enters."""
    platform_dir(os.path.dirname(path))
    ensure_dir(path, uid, gid, 0o700)


def adopt_tree(dir_fd: int, uid: int, gid: int) -> int:
    """Give every entry under the open directory ``dir_fd`` that the platform owns to ``uid:gid``; links are
    changed themselves, never followed. Returns how many entries changed."""
    me = os.geteuid()
    changed = 0
    for _root, dirs, files, rootfd in os.fwalk(".", dir_fd=dir_fd, follow_symlinks=False):
        for name in (*dirs, *files):
            try:
                st = os.stat(name, dir_fd=rootfd, follow_symlinks=False)
                if st.st_uid == me:
                    os.chown(name, uid, gid, dir_fd=rootfd, follow_symlinks=False)
                    changed += 1
            except OSError:
                continue
    return changed


def default_acl_all() -> bytes:
    """A default ACL of rwx for owner, group and others: new files in the directory get the mode their creator
    asked for (0666, 0777), whatever its umask, so that everyone a volume is shared with read-write can change
    what the others wrote. Safe because a volume is reachable only where TiHub binds it."""
    entries = [(ACL_USER_OBJ, 7, ACL_UNDEFINED_ID), (ACL_GROUP_OBJ, 7, ACL_UNDEFINED_ID),
               (ACL_OTHER, 7, ACL_UNDEFINED_ID)]
    return struct.pack("<I", ACL_XATTR_VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)


def shared_dir(path: str) -> bool:
    """A volume's directory: the platform's, mode 0777 with a default ACL (see ``default_acl_all``). Returns
    whether the file system took the ACL (without it, files keep their creator's umask)."""
    os.makedirs(path, mode=0o777, exist_ok=True)
    fd = open_dir(path)
    try:
        os.fchmod(fd, 0o777)
        try:
            os.setxattr(fd, "system.posix_acl_default", default_acl_all())
            return True
        except OSError as e:
            if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL):
                return False
            raise
    finally:
        os.close(fd)


def platform_dir(path: str, mode: int = 0o700) -> None:
    """A directory only the platform may enter (job records, logs, status)."""
    os.makedirs(path, mode=mode, exist_ok=True)
    fd = open_dir(path)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            os.fchown(fd, os.geteuid(), os.getegid())
        if st.st_mode & 0o7777 != mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)
