"""What the job endpoints' proxies reach of the ti service (``self.ti``), as a protocol the process shell's
application object satisfies (issue 32)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..ops.context import Context

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

    from .kubetb import KubeTensorBoards
    from .origins import Origins
    from .tensorboard import TensorBoards


class EndpointContext(Context, Protocol):
    fernet: Fernet  # seals the endpoint origins' login tickets and cookies
    tensorboards: TensorBoards | KubeTensorBoards
    endpoint_origins: Origins | None
    hub_public_url: str  # where an endpoint's origin sends a browser to log in
