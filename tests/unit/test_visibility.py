"""Pure parts of who sees what (SPEC JOB5) and of secret environment entries: no database, no service."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from ti_hub.domain import scopes as S
from ti_hub.domain import states as st
from ti_hub.domain.actor import FULL, SUMMARY, Actor
from ti_hub.domain.errors import ValidationError
from ti_hub.ops import secretenv
from ti_hub.ops.jobs import SUMMARY_PLAIN, render

USER = Actor("bob", frozenset(S.USER_SCOPES))  # the preset User role: view-all
ADMIN = Actor("root", frozenset(S.ADMIN_SCOPES))
LONER = Actor("lone", frozenset({S.SUBMIT}))  # a custom role without view-all


@pytest.mark.parametrize("status", st.ALL)
def test_the_view_follows_owner_scope_and_state(status):
    assert Actor("alice").job_view("alice", status) == FULL  # the owner, whatever their scopes
    assert ADMIN.job_view("alice", status) == FULL
    assert LONER.job_view("alice", status) is None
    assert USER.job_view("alice", status) == (SUMMARY if status in ("queued", "scheduling", "paused") else None)


ROW = {"id": 3, "name": "train", "display_name": "", "owner": "alice", "kind": "single", "strategy": None,
       "status": "queued", "reason": "waiting", "plan_id": 1, "pool": "default", "device_type": "A100",
       "devices_per_instance": 2, "cpu_per_instance": 4.0, "memory_mib_per_instance": 8192, "workers": 1, "ps": 0,
       "shm_mib": 64, "image": "registry.example/private:1", "command": "python train.py --key x",
       "description": "mine", "preemptible": False, "priority": 100, "exit_code": None,
       "placement": {"instances": [{"node": "n1"}]}, "created_at": None, "queued_at": None, "started_at": None,
       "finished_at": None, "queue_position": 2, "estimated_start": None, "pinned_at": None,
       "spec": {"env": {"A": "1"}, "secret_env": {"T": "sealed"}, "volumes": [{"volume_id": 1}], "ports": [40001],
                "endpoints": ["ssh"]}}


class Row:
    _mapping = ROW


def test_a_summary_holds_who_what_state_how_much_and_the_queue_place_only():
    out = render(Row(), view=SUMMARY)
    assert set(out) == {*SUMMARY_PLAIN, "created_at", "queued_at", "instances", "queue", "summary"}
    assert out["queue"]["position"] == 2 and out["devices_per_instance"] == 2 and out["summary"] is True
    assert "python train.py" not in repr(out) and "private" not in repr(out) and "sealed" not in repr(out)
    full = render(Row())
    assert full["command"] == "python train.py --key x" and full["secret_env_names"] == ["T"]
    assert "sealed" not in repr(full)  # not even the sealed token is shown


def test_secret_entries_seal_and_open_and_follow_the_env_rules():
    key = Fernet(Fernet.generate_key())
    sealed = secretenv.seal(key, {"TOKEN": "v-1", "EMPTY": ""})
    assert "v-1" not in repr(sealed) and secretenv.unseal(key, sealed) == {"TOKEN": "v-1", "EMPTY": ""}
    assert secretenv.names({"secret_env": sealed}) == ["EMPTY", "TOKEN"] and secretenv.names({}) == []
    with pytest.raises(secretenv.UnsealError, match="secret key changed"):
        secretenv.unseal(Fernet(Fernet.generate_key()), sealed)
    with pytest.raises(secretenv.UnsealError):
        secretenv.unseal(None, sealed)
    with pytest.raises(RuntimeError):
        secretenv.seal(None, {"TOKEN": "v"})
    assert secretenv.seal(None, {}) == {} and secretenv.unseal(None, {}) == {}
    assert secretenv.parse(None, {}) == {} and secretenv.parse({"N": 5}, {}) == {"N": "5"}
    for bad, field in (([], "secret_env"), ({"A": "x"}, "secret_env.A"), ({"RANK": "0"}, "secret_env.RANK"),
                       ({f"V{i}": "x" for i in range(120)}, "secret_env")):
        with pytest.raises(ValidationError) as err:
            secretenv.parse(bad, {"A": "1", **{f"E{i}": "x" for i in range(10)}})
        assert err.value.field == field
