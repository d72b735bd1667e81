"""The rules of people (ops/people.py): profile fields, new users, CSV files, the last admin. Pure."""

from __future__ import annotations

import pytest

from ti_hub.domain.errors import ValidationError
from ti_hub.ops import people as P


@pytest.mark.parametrize("data, field", [
    ({"email": "a@b"}, "email"), ({"email": "a b@example.org"}, "email"), ({"email": "x" * 250 + "@ex.org"}, "email"),
    ({"phone": "12"}, "phone"), ({"phone": "+1 (555) 0100"}, "phone"), ({"phone": "phone"}, "phone"),
    ({"nickname": "x" * 64}, "nickname"), ({"nickname": "tab\there"}, "nickname"), ({"email": 5}, "email"),
])
def test_bad_profile_fields_are_named(data, field):
    with pytest.raises(ValidationError) as e:
        P.profile_fields(data)
    assert e.value.field == field


def test_good_profile_fields_and_clearing():
    assert P.profile_fields({"email": "ann.lee+ti@mail.example.org", "phone": "+86 10-1234 5678",
                             "nickname": " Ann "}) == {"email": "ann.lee+ti@mail.example.org",
                                                       "phone": "+86 10-1234 5678", "nickname": "Ann"}
    assert P.profile_fields({"email": "", "phone": ""}) == {"email": "", "phone": ""}


@pytest.mark.parametrize("data, field", [
    ({"password": "long-enough"}, "name"), ({"name": "Ann", "password": "long-enough"}, "name"),
    ({"name": "ann"}, "password"), ({"name": "ann", "password": "short"}, "password"),
    ({"name": "ann", "password": "long-enough", "groups": ["bad group"]}, "groups"),
    ({"name": "ann", "password": "long-enough", "admin": True}, "admin"),
])
def test_new_users_are_checked(data, field):
    with pytest.raises(ValidationError) as e:
        P.new_user(data)
    assert e.value.field == field


def test_csv_rows_carry_their_line_and_every_fault():
    text = ("name,password,email,groups\n"
            "ann,pass-ann-123,ann@example.org,team-a;team-b\n"
            "\n"
            "bob,short,,\n"
            "ann,pass-ann-456,,\n"
            "cid,pass-cid-123,not-mail,\n"
            "dee,pass-dee-123\n")
    rows, refused = P.parse_csv(text)
    assert [(r["row"], r["name"], r["groups"]) for r in rows] == [(2, "ann", ["team-a", "team-b"])]
    assert [(r["row"], r["field"]) for r in refused] == [(4, "password"), (5, "name"), (6, "email"), (7, "csv")]
    assert "line 2" in refused[1]["detail"]


@pytest.mark.parametrize("text", ["", "name,secret\nx,y\n", "nickname,email\nx,y\n", "name,name,password\n",
                                  "name,password\n"])
def test_unusable_csv_files_are_refused_whole(text):
    with pytest.raises(ValidationError) as e:
        P.parse_csv(text)
    assert e.value.field == "csv"
