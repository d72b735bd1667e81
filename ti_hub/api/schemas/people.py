"""Schemas of people (SPEC ACC3-4): users with their profiles, imports from CSV, groups."""

from __future__ import annotations

from ...ops import people as P
from ..contract import Param
from .common import BOOL, MAYBE_TIME, STR, answer, array, nullable, obj, page_of, string

USER_NAME = string(63, 1, P.USER_RULE, pattern=P.USER_PATTERN)
GROUP_NAME = string(63, 1, P.GROUP_RULE, pattern=P.GROUP_PATTERN)
NO_CONTROL = r"^[^\x00-\x1f]*$"  # text without control characters (ops/people.py)
NICKNAME = string(P.NICKNAME_MAX, description=f"at most {P.NICKNAME_MAX} characters, no control characters",
                  pattern=NO_CONTROL)
EMAIL = string(254, description=P.EMAIL_RULE + ", or empty", pattern=P.EMAIL_PATTERN)
PHONE = string(32, description=P.PHONE_RULE + ", or empty", pattern=P.PHONE_PATTERN)
EMAIL_VERIFIED = {**BOOL, "description": "alert notices reach the email only when true: an admin set it, or its "
                                         "owner opened the link mailed to it (issue 31)"}
PASSWORD = string(P.PASSWORD_MAX, P.PASSWORD_MIN, P.PASSWORD_RULE, pattern=P.PASSWORD_PATTERN)
DESCRIPTION = string(P.DESCRIPTION_MAX, description=f"at most {P.DESCRIPTION_MAX} characters, no control "
                                                    "characters", pattern=NO_CONTROL)
MEMBERS = array(string(255, 1, "a hub user name"), minItems=1, maxItems=P.MAX_MEMBERS)

USER = answer({"name": STR, "nickname": STR, "email": STR, "phone": STR, "email_verified": EMAIL_VERIFIED,
               "enabled": BOOL,
               "admin": {**BOOL, "description": "a system admin: in group ti-admins, or a hub admin"},
               "hub_admin": BOOL, "groups": array(STR), "roles": array(STR), "last_activity": nullable(STR),
               "changed_at": MAYBE_TIME},
              title="User", description="a hub user with TiHub's profile of them")
USER_PAGE = page_of(USER)
NEW_USER = obj({"name": USER_NAME, "password": PASSWORD, "nickname": NICKNAME, "email": EMAIL, "phone": PHONE,
                "groups": array(GROUP_NAME, maxItems=100)}, ["name", "password"], title="NewUser",
               description="a user to create; they log in at once with the password")
USER_CHANGE = obj({"nickname": NICKNAME, "email": EMAIL, "phone": PHONE,
                   "admin": {**BOOL, "description": "true: make a system admin (group ti-admins); false: demote"}},
                  title="UserChange", minProperties=1)
IMPORT = obj({"csv": string(description="format ti-users-csv: the file's text (a body is at most 1 MiB): a header "
                                        "line name,password[,nickname,email,phone,groups] and one line per user "
                                        f"(at most {P.MAX_CSV_ROWS}), each field as for POST /users; groups separated "
                                        "by ';'", format="ti-users-csv")},
             ["csv"], title="UserImport")
IMPORT_ROW = answer({"row": {"type": "integer", "description": "the line in the file (the header is line 1)"},
                     "name": STR, "status": {"type": "string", "enum": ["created", "refused", "not created"]},
                     "field": nullable(STR), "detail": STR}, title="ImportRow")
IMPORT_REPORT = answer({"created": {"type": "integer"}, "rows": array(IMPORT_ROW)}, title="ImportReport",
                       description="every row created (a file with a refused row creates nobody: 400 with "
                                   "the same rows)")

GROUP = answer({"name": STR, "description": STR, "users": array(STR), "roles": array(STR)}, title="Group")
GROUP_PAGE = page_of(GROUP)
NEW_GROUP = obj({"name": GROUP_NAME, "description": DESCRIPTION, "users": MEMBERS}, ["name"], title="NewGroup")
GROUP_CHANGE = obj({"name": GROUP_NAME, "description": DESCRIPTION}, title="GroupChange", minProperties=1,
                   description="a new name (members, description and TiHub's references follow) or description")
MEMBERS_BODY = obj({"users": MEMBERS}, ["users"], title="Members",
                   description="all or nothing: an unknown user is refused by name and nothing changes")

USER_PARAM = Param(string(255, 1, "a hub user name"), "the user")
GROUP_PARAM = Param(string(255, 1, "a group name"), "the group")
