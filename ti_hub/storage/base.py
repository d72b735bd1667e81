"""What every volume driver offers the ops (``ti_hub.ops.volumes``) and the job runner.

The ops call a driver synchronously, from a database worker thread, inside the transaction that records
the change, and always last: a driver that raises rolls the change back, so a refused create leaves no
row and a failed delete keeps the row. Drivers raise ``ti_hub.domain.errors`` for what a user should
read (they reach the API as they are), anything else for what an admin must fix (logged, a 500).

A driver whose datasets are long copies (``snapshots_later``) does not copy in ``create``: the dataset is
stored as ``copying`` and the leader fills it with ``snapshot`` outside any transaction
(``tasks/snapshots.py``). ``who`` (``storage.userfs.As``) is the uid that reads users' files where the
driver reads them at all: never the platform's own when it is root.

``volume`` is the volume's ``owner/name`` (names never change after creation), for drivers that name
their storage after it; ``kind`` is one of ``ti_hub.ops.quotas.STORAGE_KINDS``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

from traitlets.config import LoggingConfigurable

from ..backends.base import Mount


class VolumeDriver(LoggingConfigurable):
    snapshots_later = False  # True: datasets are filled by ``snapshot``, after the create is stored

    def path(self, volume_id: int) -> Path | str:
        """Where the volume's bytes are on this machine, for the local backend and spawner; drivers whose
        volumes have no host path return "" (their backends mount volumes by their own names)."""
        raise NotImplementedError

    def create(self, volume_id: int, kind: str, source_id: int | None = None, *, volume: str = "",
               capacity_gib: int = 0, source: str = "") -> None:
        """Make the volume's storage; a dataset (``source_id`` set) starts as a copy of ``source``."""
        raise NotImplementedError

    def delete(self, volume_id: int, *, volume: str = "", kind: str = "") -> None:
        """Remove the volume's storage and its data; storage already gone is not an error."""
        raise NotImplementedError

    def expand(self, volume_id: int, volume: str, new_gib: int, *, kind: str = "") -> None:
        """Grow the volume to ``new_gib`` online. By default capacity is TiHub's quota alone: nothing to do."""
        return

    def grows_online(self, volume_id: int) -> bool:
        """Whether ``expand`` works while jobs mount the volume; where not, the ops refuse it while any do."""
        return True

    async def snapshot(self, volume_id: int, source_id: int, who: Any) -> AsyncIterator[dict[str, Any]]:
        """Fill the dataset ``volume_id`` from ``source_id`` (only where ``snapshots_later``); yields progress
        (``{"total": N}``, ``{"done": N}``) and ends with ``{"ok": ...}`` or ``{"error": reason}``."""
        raise NotImplementedError
        yield {}  # an async generator, for the type

    def usage_bytes(self, volume_id: int, max_files: int = 100_000, *, who: Any = None) -> int | None:
        """Bytes in use, or None where the driver cannot tell (the API then shows ``used_bytes: null``);
        a driver that counts files may stop after ``max_files``."""
        raise NotImplementedError

    def browse(self, volume_id: int, rel: str = "", limit: int = 1000, *, who: Any = None) -> dict[str, Any]:
        """STO7: one directory (or file) of the volume; raise a ``TiError`` where the driver cannot."""
        raise NotImplementedError

    def personal_mounts(self, owner: str) -> list[Mount]:
        """STO8: the owner's work and archive directories (``domain.personal``) as read-write mounts; no I/O.
        Empty where this driver keeps none."""
        return []

    def ensure_personal(self, owner: str) -> None:
        """Make the owner's personal storage where it is missing, before their work starts (blocking: called
        from a worker thread). Storage that needs the owner's uid is made by the backend instead."""
        return

    def restore(self, volume_ids: Collection[int]) -> None:
        """Blocking, once at the service's start, before anything serves: make the stored volumes (``volume_ids``:
        every one but scratch) reachable again, e.g. mount what a reboot unmounted, and say in the log how
        capacity is held."""
        return

    disk_note: str | None = None  # where capacity is only measured, not enforced: said with the plans' limits

    def close(self) -> None:
        """Release connections and threads (the service may simply exit instead)."""
        return
