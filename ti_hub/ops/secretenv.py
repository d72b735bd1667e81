"""Secret environment entries of a training job (JOB2): sealed when submitted, shown to nobody afterwards.

A submission's ``secret_env`` ({NAME: value}, the rules of ``env``) is encrypted with the service's Fernet key --
the one that already seals registry passwords (``TiService.secret_file``, default data_dir/ti_secret) -- and kept
in the job's spec as {NAME: token}. The API shows the names only (``secret_env_names``), to the owner and admins
alike; the values are opened only when the scheduler launches the job (``service/loop.py``). A clone or a resume
carries the sealed tokens as they are, never opening them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from ..domain import validation as v

FIELD = "secret_env"


def parse(value: Any, env: Mapping[str, str], field: str = FIELD) -> dict[str, str]:
    """The submitted secret entries, checked like ``env``; a name is either plain or secret, never both."""
    out = v.env(value, field)
    for name in out:
        if name in env:
            raise v.ValidationError(f"{field}: {name} is also in env; a variable is either plain or secret",
                                    field=f"{field}.{name}")
    if len(out) + len(env) > v.MAX_ENV:
        raise v.ValidationError(f"{field}: at most {v.MAX_ENV} variables in env and {field} together", field=field)
    return out


def seal(key: Fernet | None, values: Mapping[str, str]) -> dict[str, str]:
    """{NAME: Fernet token}; raises when the service gave no key (it always does: TiService.fernet)."""
    if not values:
        return {}
    if key is None:
        raise RuntimeError("no key to seal secret environment entries with (OpsSettings.secret_key)")
    return {name: key.encrypt(val.encode()).decode("ascii") for name, val in values.items()}


class UnsealError(Exception):
    """A sealed value the service's key cannot open (the key file was replaced): the job cannot start."""


def unseal(key: Fernet | None, sealed: Mapping[str, str]) -> dict[str, str]:
    if not sealed:
        return {}
    if key is None:
        raise UnsealError("no key to open its secret environment with")
    try:
        return {name: key.decrypt(token.encode("ascii")).decode() for name, token in sealed.items()}
    except (InvalidToken, ValueError, AttributeError):
        raise UnsealError("its secret environment cannot be decrypted: the service's secret key changed since it "
                          "was submitted; submit it again with its secret values") from None


def names(spec: Mapping[str, Any]) -> list[str]:
    return sorted(spec.get(FIELD) or {})
