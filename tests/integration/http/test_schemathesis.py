"""Fuzz every operation of the OpenAPI schema against a running broker: never a 500.

The broker is this module's own (`start_broker`), so what the fuzzer creates or
deletes cannot disturb other tests. It is seeded with a vhost, queue,
exchange, binding, policy and user, and path parameters are drawn mostly from
their names (dictionaries), so generated requests reach the handlers instead
of stopping at a 404. The run is derandomized (fixed seed), uses schemathesis'
fuzzing phase only (positive and negative inputs) with a bounded number of
examples per operation. Requests that would lock the fuzzer out (changing or
deleting `guest`, deleting vhost `/`) are pointed at a throwaway name instead,
and the seed objects are declared again after every successful DELETE.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.fuzz_budget import budget
from tests.integration.conftest import BrokerProcess, start_broker

pytestmark = [pytest.mark.timeout(budget(240, 3600)), pytest.mark.fuzz]

# Per operation: about 100 operations, so well over 10,000 requests in the full run.
MAX_EXAMPLES = budget(15, 150)
SEED = 20_240_611
GUEST = ("guest", "guest")
DEFAULT_VHOST = "default-vhost"  # stands for "/": schemathesis never generates a "/" in a path
VHOSTS = [DEFAULT_VHOST, "fuzz", "fuzz-doomed"]
PROTECTED_VHOSTS = (DEFAULT_VHOST, "fuzz")
NAMES = ["fuzz-q", "fuzz-x", "fuzz-p", "amq.default", "amq.direct"]
USERS = ["fuzz-user", "guest"]
THROWAWAY = "fuzz-throwaway"
REQUESTS: collections.Counter[str] = collections.Counter()  # by operation, for the report
FULL = {"configure": ".*", "write": ".*", "read": ".*"}


def seed_broker(url: str, check: bool = True) -> None:
    """The objects the fuzzer's path parameters name (again after the fuzzer deleted one:
    then without `check`, as the fuzzer may have re-declared one differently)."""
    with httpx.Client(base_url=url, auth=GUEST, timeout=10.0) as client:
        steps: list[tuple[str, str, dict[str, Any]]] = [
            ("PUT", "/api/vhosts/fuzz", {}),
            ("PUT", "/api/vhosts/fuzz-doomed", {}),
            ("PUT", "/api/permissions/fuzz-doomed/guest", FULL),
            ("PUT", "/api/queues/fuzz-doomed/fuzz-q", {}),
            ("PUT", "/api/users/fuzz-user", {"password": "fuzz", "tags": "management"}),
            ("PUT", "/api/permissions/fuzz/guest", FULL),
            ("PUT", "/api/permissions/%2F/fuzz-user", FULL),
            ("PUT", "/api/exchanges/%2F/fuzz-x", {"type": "topic"}),
            ("PUT", "/api/queues/%2F/fuzz-q", {"arguments": {"x-max-length": 1000}}),
            ("PUT", "/api/queues/fuzz/fuzz-q", {}),
            ("POST", "/api/bindings/%2F/e/fuzz-x/q/fuzz-q", {"routing_key": "#"}),
            ("PUT", "/api/policies/%2F/fuzz-p",
             {"pattern": "^fuzz", "definition": {"max-length": 500}, "apply-to": "queues"}),
        ]
        for method, path, body in steps:
            response = client.request(method, path, json=body)
            assert not check or response.status_code in (201, 204), (path, response.text)
        published = client.post("/api/exchanges/%2F/fuzz-x/publish-batch", json={
            "messages": [{"routing_key": f"k.{i}", "payload": f"m{i}"} for i in range(20)]})
        assert not check or published.status_code == 200, published.text


def fuzz_config() -> schemathesis.Config:
    return schemathesis.Config.from_dict({
        "seed": SEED,
        "dictionaries": {
            "vhosts": {"values": VHOSTS}, "names": {"values": NAMES},
            "users": {"values": USERS}, "props": {"values": ["~", "%23"]},
        },
        "parameters": {
            "path.vhost": {"dictionary": "vhosts", "probability": 0.8},
            "path.name": {"dictionary": "names", "probability": 0.7},
            "path.source": {"dictionary": "names", "probability": 0.7},
            "path.destination": {"dictionary": "names", "probability": 0.7},
            "path.user": {"dictionary": "users", "probability": 0.7},
            "path.props": {"dictionary": "props", "probability": 0.5},
        },
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "deterministic": True},
        "phases": {"examples": {"enabled": False}, "coverage": {"enabled": False},
                   "stateful": {"enabled": False}},
        "auth": {"basic": {"username": GUEST[0], "password": GUEST[1]}},
    })


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(Path(tmp_path_factory.mktemp("fuzz")) / "data")
    try:
        seed_broker(broker.url)
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_broker: BrokerProcess) -> OpenApiSchema:
    return schemathesis.openapi.from_url(f"{fuzz_broker.url}/openapi.json", config=fuzz_config())


def keep_fuzzer_able(case: schemathesis.Case) -> None:
    """Point requests that would lock the fuzzer out at a throwaway name, and put "/" for
    the default vhost's stand-in."""
    parameters = case.path_parameters or {}
    path, method = case.operation.path, case.method.upper()
    if method != "GET":
        if parameters.get("user") == "guest" and path.startswith(("/api/users/",
                                                                  "/api/permissions/")):
            parameters["user"] = THROWAWAY
        if method == "DELETE" and path == "/api/vhosts/{vhost}" \
                and parameters.get("vhost") in PROTECTED_VHOSTS:
            parameters["vhost"] = THROWAWAY
    if parameters.get("vhost") == DEFAULT_VHOST:
        parameters["vhost"] = "%2F"  # path parameters are sent as generated: already quoted


schema = schemathesis.pytest.from_fixture("fuzz_schema").exclude(path_regex=r"^/ws")


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
def test_no_operation_answers_a_server_error(case: schemathesis.Case) -> None:
    keep_fuzzer_able(case)
    REQUESTS[f"{case.method.upper()} {case.operation.path}"] += 1
    response = case.call(auth=GUEST, timeout=10)
    if case.method.upper() == "DELETE" and response.status_code < 300:
        seed_broker(case.operation.schema.get_base_url(), check=False)
    case.validate_response(response, checks=[not_a_server_error])


def test_the_broker_survived_and_logged_no_error(fuzz_broker: BrokerProcess) -> None:
    """Runs after the fuzzing: no handler failed in a way that only shows in the log."""
    assert fuzz_broker.process.poll() is None
    print(f"http fuzz: {sum(REQUESTS.values())} requests over {len(REQUESTS)} operations")
    assert httpx.get(f"{fuzz_broker.url}/api/overview", auth=GUEST, timeout=10).status_code == 200
    log = fuzz_broker.log()
    assert "Traceback" not in log and " ERROR " not in log, log[-5000:]
