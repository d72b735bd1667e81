"""The API's contract without a server: strict JSON bodies, ids and numbers in URLs, the schemas' refusals,
the OpenAPI document printed from the route table, and the access log's scrubbing."""

from __future__ import annotations

import inspect
import json
import os
import re

import pytest

from ti_hub.api import jsonbody
from ti_hub.api.contract import PARAM_RE, check, check_path, check_query, openapi_path, route_regex
from ti_hub.api.schemas import account as A
from ti_hub.api.schemas import common as C
from ti_hub.api.schemas import jobs as J
from ti_hub.api.schemas import resources as R
from ti_hub.domain import validation as v
from ti_hub.domain.errors import ValidationError
from ti_hub.domain.scrub import scrub
from ti_hub.hubclient.names import HubNames
from ti_hub.service.openapi import document
from ti_hub.service.web import ROUTES


def refused(fn, *args) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        fn(*args)
    return e.value


# -- request bodies --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw,field,words", [
    (b'{"plan": "small", "plan": "huge"}', "plan", "twice"),
    (b'{"a": {"x": 1, "x": 2}}', "x", "twice"),
    (b'{"n": NaN}', None, "not valid JSON"),
    (b'{"n": -Infinity}', None, "not valid JSON"),
    (b'{"n": 1e999}', None, "not valid JSON"),
    (b'{"n": ' + b"9" * 5000 + b"}", None, "not valid JSON"),  # past Python's 4300-digit int limit
    (b"[" * 100_000 + b"]" * 100_000, None, "nests deeper"),  # a RecursionError inside json
    (b'{"a": ' + b"[" * 40 + b"]" * 40 + b"}", None, "nests deeper"),
    (b"[1, 2]", None, "JSON object"),
    (b"\xff\xfe{", None, "not valid JSON"),
    (b" " * (jsonbody.MAX_BODY + 1), None, "at most"),
])
def test_bodies_are_parsed_strictly(raw, field, words):
    e = refused(jsonbody.parse_object, raw)
    assert e.field == field and words in e.detail


def test_good_bodies_pass_and_an_empty_body_is_an_empty_object():
    assert jsonbody.parse_object(b"") == {}
    deep = {"a": {"b": [{"c": [1, 2.5, None, True]}]}}
    assert jsonbody.parse_object(json.dumps(deep).encode()) == deep
    assert jsonbody.depth(deep) == 5 and jsonbody.depth(1) == 0


# -- numbers and ids written in URLs and bodies ----------------------------------------------------------------
def test_only_ascii_digits_are_digits():
    assert "²".isdigit() and "٣".isdigit()  # what str.isdigit() lets through
    assert not v.is_digits("²") and not v.is_digits("٣") and not v.is_digits("") and v.is_digits("0123")
    assert refused(v.parse_int, "²", "limit", 1, 500).field == "limit"
    assert refused(v.parse_int, "1_000", "limit", 1, 5000).field == "limit"
    assert refused(v.parse_int, "9" * 30, "offset", 0, 10).field == "offset"
    assert v.parse_int("-3", "x", -5, 5) == -3


def test_ids_stay_in_the_databases_range():
    assert v.db_id("42") == 42 and v.db_id(v.MAX_ID) == v.MAX_ID
    for bad in (0, -1, v.MAX_ID + 1, 2**64, "²", "9" * 20, True, 1.5, None, "x"):
        assert refused(v.db_id, bad, "plan").field == "plan"
    assert v.id_in("17") == 17
    assert v.id_in("²") is None and v.id_in("9" * 20) is None and v.id_in("0") is None  # then just a name


def test_patterns_never_let_a_final_newline_through():
    from ti_hub.ops.images import image_address

    assert refused(v.name, "good-name\n").field == "name"
    assert refused(v.mount_path, "/mnt/data\n").field == "mount_path"
    assert refused(image_address, "python\n").field == "image"
    assert refused(v.env, {"GOOD\n": "x"}).field == "env.GOOD\n"


# -- schemas -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body,field,words", [
    ({"name": "good-job", "sneaky": 1}, "sneaky", "unknown field 'sneaky'"),
    ({}, "name", "name is required"),
    ({"name": "good-job", "plan": 2**64}, "plan", "a plan name or id"),
    ({"name": "good-job", "plan": True}, "plan", "a plan name or id"),
    ({"name": "good-job", "workers": -5}, "workers", "at least 0"),
    ({"name": "good-job", "ports": [80]}, "ports", "40000"),
    ({"name": "good-job", "env": {"1BAD": "x"}}, "env.1BAD", "not a valid name"),
    ({"name": "good-job", "volumes": [{"mount_path": "/mnt/x"}]}, "volumes[0].volume", "required"),
    ({"name": "good-job", "volumes": [{"volume": "v", "mount_path": 3}]}, "volumes[0].mount_path", "a string"),
    ({"name": "good-job", "command": "x" * (v.MAX_COMMAND + 1)}, "command", "at most"),
    ({"name": "good-job", "kind": "quantum"}, "kind", "one of: single, distributed"),
])
def test_the_submission_schema_names_the_field_and_the_rule(body, field, words):
    e = refused(check, J.SUBMISSION, body)
    assert e.field == field and words in e.detail, e.detail
    assert len(e.detail) < 400  # a rule, never the value sent


def test_schemas_accept_what_the_clients_send():
    check(J.SUBMISSION, {"name": "mnist-ddp", "kind": "distributed", "strategy": "allreduce", "workers": 2,
                         "plan": "demo-gpu-1", "image": "pytorch", "command": "python train.py",
                         "env": {"EPOCHS": "3", "LR": 0.1}, "ports": "40001,40002", "endpoints": ["tensorboard"],
                         "volumes": [{"volume": "alice/data", "mount_path": "/mnt/data", "read_only": False}],
                         "credential": "my-registry", "preemptible": False, "estimated_duration": 3600,
                         "template": "my-template", "description": ""})
    check(A.NEW_TEMPLATE, {"name": "my-tpl", "spec": {"name": "ignored", "plan": 1, "command": "true"}})
    check(R.SET_QUOTA, {"user": "*", "kind": "block", "capacity_gib": 10})


def test_query_and_path_parameters_are_checked():
    e = refused(check_query, J.JOB_FILTERS, {"limt": "5"})
    assert e.field == "limt" and "unknown query parameter" in e.detail and "limit" in e.detail
    assert refused(check_query, J.JOB_FILTERS, {"limit": "²"}).field == "limit"
    assert refused(check_query, J.JOB_FILTERS, {"status": "queued,nope"}).field == "status"
    assert refused(check_query, J.JOB_FILTERS, {"all": "maybe"}).field == "all"
    assert refused(check_query, {}, {"x": "1"}).detail == "unknown query parameter 'x'; this operation takes none"
    check_query(J.JOB_FILTERS, {"status": "queued,running", "all": "1", "limit": "5", "token": "t"})
    assert refused(check_path, {"id": C.ID_PARAM}, {"id": "²"}).field == "id"
    assert refused(check_path, {"id": C.ID_PARAM}, {"id": "9" * 20}).field == "id"
    assert refused(check_path, {"id": C.JOB_REF}, {"id": "bad name!"}).field == "id"
    check_path({"id": C.JOB_REF}, {"id": "my-job"})


RUNNABLE = {"name": "good-job", "plan": "p", "image": "i", "command": "c"}


@pytest.mark.parametrize("schema,body,field,words", [
    (J.MOVE, {"to": "top", "after": 3}, "to", "give exactly one of: to, before, after"),
    (J.MOVE, {"to": None}, "to", "give exactly one of"),
    (R.NEW_SHARE, {}, "user", "give exactly one of: user, group"),
    (J.SUBMISSION, {"name": "good-job", "plan": "p", "image": "i"}, "command", "command is required"),
    (J.SUBMISSION, {"name": "good-job", "command": " \t"}, "command", "nor be blank"),
    (J.SUBMISSION, {"name": "good-job", "env": {"A": "x\x00"}}, "env.A", "NUL"),
    (J.SUBMISSION, {**RUNNABLE, "kind": "distributed", "workers": 1}, "workers", "at least 2"),
    (J.SUBMISSION, {**RUNNABLE, "workers": 3}, "workers", "distributed jobs only"),
    (J.SUBMISSION, {"name": "good-job", "ports": "40001,4000"}, "ports", "40000"),
    (R.NEW_VOLUME, {"name": "data", "kind": "filesystem", "capacity_gib": 1, "source": "x"}, "source", "datasets"),
    (R.NEW_VOLUME, {"name": "data", "kind": "dataset", "capacity_gib": 1}, "source", "source is required"),
    (R.NEW_PLAN, {"name": "gpus", "kinds": ["single"], "cpu": 1, "memory_mib": 64, "device_type": "a100",
                  "device_count": 0}, "device_count", "between 1 and 64"),
    (R.SET_QUOTA, {"user": "*", "kind": "block"}, "capacity_gib", "capacity_gib is required"),
])
def test_rules_that_tie_fields_together_are_the_documents_too(schema, body, field, words):
    """What the validators refuse of a request that every field alone allows (a dataset without its source, one
    of user or group), the schema says too: the document states it and the refusal names the field and rule."""
    e = refused(check, schema, body)
    assert e.field == field and words in e.detail, (e.field, e.detail)
    # and the tie is only checked once every field is right: a field's own rule is said first
    assert refused(check, J.SUBMISSION, {"name": "x"}).field == "name"


def test_the_document_states_configured_limits_and_which_bodies_are_required():
    doc = document("/p", ROUTES, {"TiService.max_workers": 7})
    props = doc["components"]["schemas"]["Submission"]["properties"]
    assert props["workers"]["maximum"] == 7 and props["workers"]["x-limit"] == "TiService.max_workers"
    assert props["ps"]["maximum"] == 16  # the default where the service gives none
    # an empty body is {}: required exactly where {} is refused
    assert doc["paths"]["/users/{user}"]["patch"]["requestBody"]["required"] is True  # minProperties
    assert doc["paths"]["/jobs/{id}/move"]["post"]["requestBody"]["required"] is True  # one of to, before, after
    assert doc["paths"]["/jobs/{id}/clone"]["post"]["requestBody"]["required"] is False


# -- the route table and the document --------------------------------------------------------------------------
def test_every_route_declares_its_parameters_and_every_operation_its_answer():
    for r in ROUTES:
        assert set(PARAM_RE.findall(r.path)) == set(r.params), r.path
        for method, op in r.ops.items():
            assert getattr(r.handler, method, None), f"{r.handler.__name__} has no {method}() for {r.path}"
            assert (op.response is None) == (op.status == 204), f"{method} {r.path}"
    assert route_regex("/jobs/{id}/(kill)") == "/jobs/([^/]+)/(kill)" and openapi_path("/jobs/{id}/(kill)") == \
        "/jobs/{id}/kill"


def test_a_handler_reads_a_body_exactly_where_the_contract_declares_one():
    for r in ROUTES:
        for method, op in r.ops.items():
            reads = "self.body()" in inspect.getsource(getattr(r.handler, method))
            if r.handler.__name__ == "JobActionHandler":  # one handler, bodies for some actions only
                action = re.search(r"\((\w+)\)", r.path).group(1)
                reads = action in ("priority", "move", "clone")
            assert reads == (op.body is not None), f"{method} {r.path}: reads a body {reads}, declares {op.body}"


def test_the_document_is_valid_openapi_and_complete():
    doc = document("/services/ti/api/v1", ROUTES)
    if os.environ.get("CI"):  # the test extra installs it: CI never skips this check
        import openapi_spec_validator as validator
    else:
        validator = pytest.importorskip("openapi_spec_validator", reason="pip install -e '.[test]'")
    validator.validate(doc)
    assert doc["openapi"].startswith("3.1") and doc["security"]
    ops = [(p, m, op) for p, item in doc["paths"].items() for m, op in item.items()]
    assert len(ops) == sum(len(r.ops) for r in ROUTES) and len(ops) > 50
    for path, method, op in ops:
        codes = set(op["responses"])
        assert {"400", "401", "403"} <= codes and any(c.startswith("2") for c in codes), (method, path)
        for code, resp in op["responses"].items():
            if code != "204":
                assert "schema" in resp["content"]["application/json"], (method, path, code)
        names = {p["name"] for p in op["parameters"] if p["in"] == "path"}
        assert names == set(re.findall(r"\{(\w+)\}", path)), (method, path)
    submit = doc["paths"]["/jobs"]["post"]
    assert submit["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Submission"}
    props = doc["components"]["schemas"]["Submission"]["properties"]
    assert props["workers"]["type"] == ["integer", "null"] and props["ports"]["anyOf"]
    assert {p["name"] for p in doc["paths"]["/jobs"]["get"]["parameters"]} == set(J.JOB_FILTERS)
    assert doc["paths"]["/jobs/{id}/kill"]["post"]["responses"]["409"]


# -- the access log ----------------------------------------------------------------------------------------------
def test_credentials_in_urls_never_reach_the_log():
    assert scrub("GET /services/ti/api/v1/me?token=abc123 (1.2.3.4)") == \
        "GET /services/ti/api/v1/me?token=[secret] (1.2.3.4)"
    assert scrub("/oauth_callback?code=c0de&state=st4te&x=1") == "/oauth_callback?code=[secret]&state=[secret]&x=1"
    assert scrub("/x?limit=5&access_token=t&_xsrf=2|a") == "/x?limit=5&access_token=[secret]&_xsrf=[secret]"
    assert scrub("HTTPServerRequest(uri='/x?TOKEN=abc', remote_ip='1')") == \
        "HTTPServerRequest(uri='/x?TOKEN=[secret]', remote_ip='1')"
    assert scrub("/ssh/keys/alice?limit=2") == "/ssh/keys/alice?limit=2"


def test_hub_names_are_remembered_for_a_while_only_when_they_exist():
    now = [0.0]
    names = HubNames(60, clock=lambda: now[0], max_entries=2)
    assert not names.remembered("user", "alice")
    names.remember("user", "alice")
    assert names.remembered("user", "alice") and not names.remembered("group", "alice")
    now[0] = 61
    assert not names.remembered("user", "alice")
    for n in ("a", "b", "c"):
        names.remember("user", n)
    assert not names.remembered("user", "a") and names.remembered("user", "c")
