"""Schemas of /me (with my profile, issue 31), images (IMG1-IMG3), registry credentials, SSH keys (ACC6) and
templates (JOB7)."""

from __future__ import annotations

from ...ops.images import HOST_PATTERN, IMAGE_PATTERN
from ...ops.keys import KEY_TYPES
from .common import (BOOL, ID, NAME, STR, TEXT, TIME, answer, array, enum, integer, nullable, number, obj,
                     page_of, string, text)
from . import people as PE
from .jobs import SHAPE_RULES, SPEC_FIELDS

# permissions: the effective ones (the token's scopes narrowed by the TiHub roles held: ops/grants.py)
_WHO = {"name": STR, "kind": enum(("user", "service")), "admin": BOOL, "groups": array(STR),
        "permissions": array(STR), "roles": array(STR)}
# my profile (issue 31): what I set myself, or an admin set for me; a service has none (empty, unverified)
_PROFILE = {"nickname": STR, "email": STR, "phone": STR, "email_verified": PE.EMAIL_VERIFIED}
ME = answer({**_WHO, **_PROFILE}, title="Me")
ME_CHANGE = obj({"nickname": PE.NICKNAME, "email": PE.EMAIL, "phone": PE.PHONE}, title="MyProfileChange",
                minProperties=1, description="what to change of my profile (an empty string clears a field); a "
                                             "new email is unverified until the link mailed to it is opened")
VERIFICATION = answer(
    {"status": enum(("sent", "failed", "not_configured", "too_soon")), "detail": STR}, title="EmailVerification",
    description="what became of the verification link: sent; failed (the mail server did not take it: set the "
                "email again to retry); not_configured (this TiHub sends no email, so the address cannot be "
                "verified here); too_soon (a link went to me less than Notifier.email_link_interval ago)")
ME_CHANGED = answer({**_WHO, **_PROFILE, "verification": {
    "anyOf": [VERIFICATION, {"type": "null"}],
    "description": "null when no link was asked for (no email given, the email cleared or already verified)"}},
    title="MeChanged")

IMAGE_ADDRESS = string(512, 1, "an image address like registry/name:tag (lowercase)", pattern=IMAGE_PATTERN)
# IMG3: version, size and creation time are read from the registry (ti_hub/registry), never typed in
NEW_IMAGE = obj({"name": NAME, "address": IMAGE_ADDRESS, "accelerator": enum(("cpu", "gpu")),
                 "description": TEXT}, ["name", "address"], title="NewImage")
REGISTRY_STATE = string(description="what the image's registry said: 'ok', 'pending: ...' (still being read: list "
                                    "again), or 'unreachable: ...', 'denied: ...', 'not found: ...', "
                                    "'unreadable: ...' with the reason, or 'not read: ...' where "
                                    "ImageRegistries.reach leaves that registry out")
_STORED_IMAGE = {"id": ID, "name": STR, "address": STR, "accelerator": STR, "description": STR, "created_at": TIME,
                 "public": BOOL}
# the spawn form's choices: what is stored, without reading registries (a spawn must not wait for them)
FORM_IMAGE = answer(_STORED_IMAGE, title="FormImage")
IMAGE = answer({"id": ID, "name": STR, "address": STR,
                "version": string(description="the address's tag (or the start of its digest)"),
                "accelerator": STR, "description": STR, "created_at": TIME, "public": BOOL,
                "size_bytes": nullable(integer(0, description="the config's and layers' sizes, as the registry "
                                                              "lists them (compressed: what a pull downloads)")),
                "size_mib": nullable(number(0)),
                "image_created": nullable(string(description="when the image was built (its config's created), "
                                                             "ISO 8601 UTC")),
                "digest": nullable(string(description="the manifest (or index) digest the tag names now")),
                "registry": REGISTRY_STATE},
               title="Image")
# image_note: what this platform does with the image picked (the embedded one runs none); shown by the pickers
IMAGE_NOTE = nullable(string(description="what this platform does with the image you pick (null: it runs it)"))
IMAGE_PAGE = page_of(IMAGE, image_note=IMAGE_NOTE)

NEW_CREDENTIAL = obj({"name": NAME, "registry": string(255, 1, "a registry host with an optional :port",
                                                       pattern=HOST_PATTERN),
                      "username": text(255, filled=True), "password": text(4096, True, "never shown back")},
                     ["name", "registry", "username", "password"], title="NewCredential")
CREDENTIAL = answer({"id": ID, "name": STR, "registry": STR, "username": STR, "created_at": TIME},
                    title="Credential", description="a registry login; its password never leaves the service")
CREDENTIAL_PAGE = page_of(CREDENTIAL)

# the format: a key as ssh-keygen writes it, whose base64 data holds a key of the type it starts with (ops/keys.py);
# its length is the format's (a bare format also lets the fuzz's generator of it serve every phase)
SSH_PUBLIC_KEY = string(description="format ssh-public-key: an OpenSSH public key on one line of at most 16384 "
                                    "characters: its type (" + ", ".join(KEY_TYPES) + "), the base64 key data of "
                                    "that type, an optional comment", format="ssh-public-key")
NEW_KEY = obj({"name": NAME, "key": SSH_PUBLIC_KEY}, ["name", "key"], title="NewKey")
KEY = answer({"id": ID, "name": STR, "key": STR, "fingerprint": STR, "created_at": TIME}, title="Key")
KEY_PAGE = page_of(KEY)

# a template holds a submission without its name; it is checked as a submission is (plan, image, volumes ...)
TEMPLATE_SPEC = obj({"name": {"description": "ignored: a template carries no job name"}, **SPEC_FIELDS,
                     "secret_env": {"not": {}, "description": "absent: templates never hold secret values (give "
                                                              "them with each submission)"}},
                    title="TemplateSpec", allOf=[SHAPE_RULES])
NEW_TEMPLATE = obj({"name": NAME, "scope": enum(("user", "team")), "group": nullable(text(255)),
                    "spec": TEMPLATE_SPEC}, ["name", "spec"], title="NewTemplate",
                   description="scope team shares it with a group of mine (group); a user template names none",
                   **{"if": {"properties": {"scope": {"const": "team"}}, "required": ["scope"]},
                      "then": {"properties": {"group": text(255, filled=True)}, "required": ["group"]},
                      "else": {"properties": {"group": {"enum": [None, ""], "description": "team templates only"}}}})
TEMPLATE = answer({"id": ID, "name": STR, "owner": STR, "scope": enum(("user", "team")), "group": nullable(STR),
                   "spec": {"type": "object"}, "created_at": TIME}, title="Template")
TEMPLATE_PAGE = page_of(TEMPLATE)
