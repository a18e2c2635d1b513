"""The management UI of a three-node cluster: every node up; after kill -9 of one, the
page shows it down within 10 s without a reload, and the queue it led gets a new leader.

The page is opened on the Raft leader (the controller, which decides liveness) with
its default refresh period; the killed node is another one, the queue's leader.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.integration.cluster.cluster_nodes import Node, leader_of, running_cluster
from tests.integration.conftest import wait_for
from tests.integration.ui.conftest import log_in, screenshot

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
AUTH = ("guest", "guest")
QUEUE = "ui-failover"
SHOWN_DOWN_WITHIN_S = 10.0
NEW_LEADER_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Node]]:
    with running_cluster(tmp_path_factory.mktemp("ui-cluster")) as nodes:
        yield nodes


def queue_view(node: Node) -> dict[str, Any]:
    reply = httpx.get(f"{node.url}/api/queues/%2F/{QUEUE}", auth=AUTH, timeout=5.0)
    return dict(reply.json()) if reply.status_code == 200 else {}


def test_the_overview_shows_a_killed_node_down_and_its_queue_a_new_leader(
        cluster: list[Node], page: Page) -> None:
    controller = leader_of(cluster)
    victim = next(node for node in cluster if node is not controller)
    # client-local: the node that takes the declare leads the queue
    reply = httpx.put(f"{victim.url}/api/queues/%2F/{QUEUE}", auth=AUTH, timeout=10.0, json={
        "arguments": {"x-queue-replicas": 3, "x-queue-leader-locator": "client-local"}})
    assert reply.status_code == 201, reply.text
    wait_for(lambda: len(queue_view(victim).get("in_sync") or []) == 3
             and queue_view(victim).get("leader") == victim.name,
             "the queue led by the victim with three in-sync copies", 20.0)

    log_in(page, controller.url, "guest", "guest")
    statuses = page.locator("[data-table=nodes] [data-status]")
    expect(statuses).to_have_text(["up", "up", "up"])
    expect(page.locator("[data-table=nodes] tbody tr")).to_have_count(3)
    screenshot(page, "cluster-three-up")

    victim.kill()
    killed_at = time.monotonic()
    victim_status = page.locator(f'[data-table=nodes] tr[data-key="{victim.name}"] [data-status]')
    expect(victim_status).to_have_text("down", timeout=SHOWN_DOWN_WITHIN_S * 1000)
    shown_after_s = time.monotonic() - killed_at
    print(f"shown down {shown_after_s:.1f} s after the kill")
    assert shown_after_s <= SHOWN_DOWN_WITHIN_S
    screenshot(page, "cluster-one-down")

    page.click("#nav a[data-page=queues]")
    page.click(f'[data-table=queues] tr[data-key="//{QUEUE}"] a')
    leader = page.locator("[data-fact=leader]")
    expect(leader).not_to_have_text(victim.name, timeout=NEW_LEADER_WITHIN_S * 1000)
    expect(leader).not_to_be_empty()
    new_leader = leader.inner_text()
    assert new_leader in {node.name for node in cluster} - {victim.name}
    screenshot(page, "cluster-new-leader")
