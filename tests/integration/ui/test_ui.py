"""The management UI in a real browser against one broker: login, the overview, the
queue forms (declare, publish, get), replay paging, charts, a pika client's channel
and closing its connection, and what a monitoring user may not do. Each test is
bounded; the page waits at most 10 s for any one step."""

from __future__ import annotations

import time

import httpx
import pika
import pytest
from pika.exceptions import ConnectionClosedByBroker
from playwright.sync_api import Page, expect

from tests.integration.conftest import BrokerProcess, wait_for
from tests.integration.ui.conftest import log_in, screenshot

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
AUTH = ("guest", "guest")


def api(broker: BrokerProcess) -> httpx.Client:
    return httpx.Client(base_url=broker.url, auth=AUTH, timeout=10.0)


def add_user(broker: BrokerProcess, name: str, tags: str, *, permissions: bool) -> None:
    with api(broker) as client:
        assert client.put(f"/api/users/{name}", json={"password": "secret-pw", "tags": tags}
                          ).status_code in (201, 204)
        if permissions:
            assert client.put(f"/api/permissions/%2F/{name}", json={
                "configure": ".*", "write": ".*", "read": ".*"}).status_code in (201, 204)


def declare(broker: BrokerProcess, queue: str) -> None:
    with api(broker) as client:
        assert client.put(f"/api/queues/%2F/{queue}", json={}).status_code in (201, 204)


def publish(broker: BrokerProcess, queue: str, bodies: list[str]) -> None:
    with api(broker) as client:
        reply = client.post("/api/exchanges/%2F/amq.default/publish-batch", json={"messages": [
            {"routing_key": queue, "payload": body, "payload_encoding": "string"}
            for body in bodies]})
        assert reply.status_code == 200 and all(r["confirmed"] for r in reply.json()["results"])


def pika_connection(broker: BrokerProcess, client_name: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=broker.amqp_port,
        credentials=pika.PlainCredentials("guest", "guest"),
        client_properties={"connection_name": client_name},
        socket_timeout=5, blocked_connection_timeout=5, connection_attempts=1))


def connection_name(broker: BrokerProcess, client_name: str) -> str:
    """The broker's name of the connection the client named `client_name`."""
    def named() -> str | None:
        with api(broker) as client:
            return next((c["name"] for c in client.get("/api/connections").json()
                         if c["client_properties"].get("connection_name") == client_name),
                        None)
    return wait_for(named, f"the connection {client_name} to be listed")


def test_guest_logs_in_and_sees_the_overview(broker: BrokerProcess, page: Page) -> None:
    log_in(page, broker.url, "guest", "guest")
    expect(page.locator("#who")).to_contain_text("guest")
    expect(page.locator("[data-table=nodes] [data-status]")).to_have_text(["up"])
    expect(page.locator("[data-table=listeners] tbody tr")).to_have_count(2)
    expect(page.locator("[data-total=queues] .tile-value")).not_to_be_empty()
    screenshot(page, "overview")
    page.click("#logout")
    expect(page.locator("#login")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


def test_a_wrong_password_or_a_user_without_a_management_tag_is_refused(
        broker: BrokerProcess, page: Page) -> None:
    log_in(page, broker.url, "guest", "not-the-password")
    expect(page.locator("#login-error")).to_contain_text("wrong user name or password")
    expect(page.locator("#nav")).to_be_hidden()
    add_user(broker, "ui-plain", "", permissions=True)
    page.fill("#login input[name=user]", "ui-plain")
    page.fill("#login input[name=password]", "secret-pw")
    page.click("#login button[type=submit]")
    expect(page.locator("#login-error")).to_contain_text("none of the tags")
    expect(page.locator("#nav")).to_be_hidden()


def test_a_monitoring_user_cannot_delete_a_queue(broker: BrokerProcess, page: Page) -> None:
    declare(broker, "ui-kept")
    add_user(broker, "ui-watcher", "monitoring", permissions=False)
    log_in(page, broker.url, "ui-watcher", "secret-pw", "#/queues/%2F/ui-kept")
    expect(page.locator("[data-fact=leader]")).not_to_be_empty()
    expect(page.locator("[data-action=delete]")).to_have_count(0)
    expect(page.locator("[data-action=purge]")).to_have_count(0)
    expect(page.locator("[data-form=publish]")).to_have_count(0)
    # The API refuses anyway, whatever a page would send.
    status = page.evaluate("""async () => (await fetch('/api/queues/%2F/ui-kept', {
        method: 'DELETE', headers: {Authorization: 'Basic ' + btoa('ui-watcher:secret-pw')}
    })).status""")
    assert status == 403
    with api(broker) as client:
        assert client.get("/api/queues/%2F/ui-kept").status_code == 200
    for route, page_name in (("#/queues", "queues"), ("#/exchanges", "exchanges"),
                             ("#/connections", "connections"), ("#/admin", "admin")):
        page.evaluate(f"location.hash = {route!r}")
        expect(page.locator(f"[data-page={page_name}] table").first).to_be_visible()
        expect(page.locator("main form")).to_have_count(0)  # nothing to add, change or close


def test_declare_publish_and_get_a_message_through_the_forms(
        broker: BrokerProcess, page: Page) -> None:
    log_in(page, broker.url, "guest", "guest", "#/queues")
    form = page.locator("#declare-queue")
    form.locator("input[name=name]").fill("ui-forms")
    form.locator("button[type=submit]").click()
    expect(form.locator(".note")).to_contain_text("declared")
    link = page.locator('[data-table=queues] tr[data-key="//ui-forms"] a')
    link.click()  # the table shows it at its next refresh
    expect(page.locator("[data-page=queue] h1")).to_contain_text("ui-forms")
    publish_form = page.locator("[data-form=publish]")
    publish_form.locator("textarea[name=payload]").fill("hello from the UI")
    publish_form.locator("button[type=submit]").click()
    expect(publish_form.locator(".note")).to_contain_text("published (routed)")
    get_form = page.locator("[data-form=get]")
    get_form.locator("select[name=ackmode]").select_option("ack_requeue_false")
    get_form.locator("button[type=submit]").click()
    expect(page.locator("[data-result=get] [data-col=payload]")).to_have_text(
        ["hello from the UI"])
    with api(broker) as client:
        assert client.get("/api/queues/%2F/ui-forms").json()["messages"] == 0  # acked: gone


def replay_offsets(page: Page) -> list[str]:
    return page.locator("[data-table=replay] [data-col=offset]").all_inner_texts()


def test_the_replay_view_pages_through_a_queue(broker: BrokerProcess, page: Page) -> None:
    declare(broker, "ui-replay")
    publish(broker, "ui-replay", [f"message {i}" for i in range(25)])
    log_in(page, broker.url, "guest", "guest", "#/queues/%2F/ui-replay")
    form = page.locator("[data-form=replay]")
    form.locator("input[name=page_size]").fill("10")
    form.locator("button[type=submit]").click()
    cells = page.locator("[data-table=replay] [data-col=offset]")
    expect(cells).to_have_text([str(i) for i in range(10)])
    page.click("[data-replay=next]")
    expect(cells).to_have_text([str(i) for i in range(10, 20)])
    page.click("[data-replay=next]")
    expect(cells).to_have_text([str(i) for i in range(20, 25)])
    expect(page.locator("[data-table=replay] [data-col=payload]").last).to_have_text("message 24")
    expect(page.locator("[data-replay=next]")).to_be_disabled()
    page.click("[data-replay=previous]")
    expect(cells).to_have_text([str(i) for i in range(10, 20)])


def test_a_chart_draws_points(broker: BrokerProcess, page: Page) -> None:
    declare(broker, "ui-chart")
    log_in(page, broker.url, "guest", "guest", refresh_ms=1000)
    for round_ in range(3):  # the queued messages change while the page samples them
        publish(broker, "ui-chart", [f"chart {round_}"])
        page.wait_for_timeout(1100)
    path = page.locator('figure[data-chart="Queued messages"] path[data-series=ready]')
    page.wait_for_function("""() => {
        const p = document.querySelector(
            'figure[data-chart="Queued messages"] path[data-series=ready]');
        return p && Number(p.dataset.points) >= 2 && p.getAttribute('d').includes('L');
    }""", timeout=10_000)
    assert (path.get_attribute("d") or "").startswith("M")
    rates = page.locator('figure[data-chart="Message rates"] path[data-series=published]')
    expect(rates).to_have_count(1)
    screenshot(page, "overview-charts")


def test_charts_plot_the_brokers_samples_when_the_answer_has_them(
        broker: BrokerProcess, page: Page) -> None:
    """RabbitMQ's `*_details.samples` (newest first): counters become rates, lengths are
    plotted as they are; without samples the page's own history is used."""
    page.goto(broker.url)
    series = page.evaluate("""async () => {
        const m = await import('/ui/samples.js');
        const answer = {
            message_stats: {publish: 30, publish_details: {rate: 2, samples: [
                {sample: 30, timestamp: 20000}, {sample: 20, timestamp: 15000},
                {sample: 0, timestamp: 10000}]}},
            queue_totals: {messages_ready: 7, messages_ready_details: {samples: [
                {sample: 7, timestamp: 20000}, {sample: 3, timestamp: 10000}]},
                messages_unacknowledged: 1},
        };
        const history = new m.History(3);
        const specs = [...m.rateSpecs([['published', 'publish']]),
                       ...m.lengthSpecs((a) => a.queue_totals)];
        m.chartSeries(answer, specs, history, 'x', 1000);
        for (const t of [2000, 3000, 4000, 5000]) {
            answer.queue_totals.messages_unacknowledged += 1;
            m.chartSeries(answer, specs, history, 'x', t);
        }
        return m.chartSeries(answer, specs, history, 'x', 6000);
    }""")
    published, ready, unacked = series
    assert published == {"name": "published", "points": [[15000, 4], [20000, 2]]}
    assert ready["points"] == [[10000, 3], [20000, 7]]
    # no samples for unacked: the page's own, bounded to the last 3
    assert unacked["points"] == [[4000, 4], [5000, 5], [6000, 5]]


def test_the_queue_table_renders_one_page_of_thousands(broker: BrokerProcess,
                                                       page: Page) -> None:
    """Sorting, filtering and paging happen in the page, which draws only the page shown."""
    page.goto(broker.url)
    shown = page.evaluate("""async () => {
        const {DataTable} = await import('/ui/table.js');
        const rows = Array.from({length: 5000}, (_, i) => ({name: `q-${i}`, ready: i % 97}));
        const table = new DataTable({columns: [
            {key: 'name', label: 'Name', value: (r) => r.name},
            {key: 'ready', label: 'Ready', numeric: true, value: (r) => r.ready}],
            rowKey: (r) => r.name, name: 't'});
        document.body.append(table.element);
        table.setRows(rows);
        const keys = () => [...table.table.querySelectorAll('tbody tr')].map((r) => r.dataset.key);
        const first = keys();
        table.table.querySelectorAll('th')[1].click();  // Ready, ascending
        table.table.querySelectorAll('th')[1].click();  // Ready, descending
        const byReady = keys();
        table.filterInput.value = 'q-49';
        table.filterInput.dispatchEvent(new Event('input'));
        const filtered = keys();
        const pager = table.pager.textContent;
        return {first, byReady, filtered, pager};
    }""")
    assert len(shown["first"]) == 20
    assert shown["first"][:3] == ["q-0", "q-1", "q-2"]  # numeric-aware name order
    assert len(shown["byReady"]) == 20
    assert all(int(key.split("-")[1]) % 97 == 96 for key in shown["byReady"])
    assert len(shown["filtered"]) == 20 and all("q-49" in key for key in shown["filtered"])
    assert " of 111 " in shown["pager"]  # q-49, q-490..499, q-4900..4999


def test_the_channels_page_lists_an_open_pika_channel_with_its_state(
        broker: BrokerProcess, page: Page) -> None:
    connection = pika_connection(broker, "ui-channels")
    try:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=7)
        channel.confirm_delivery()
        name = f"{connection_name(broker, 'ui-channels')} ({channel.channel_number})"
        log_in(page, broker.url, "guest", "guest", "#/channels")
        page.locator("[data-page=channels] input.filter").fill(name)
        row = page.locator(f'[data-table=channels] tr[data-key="{name}"]')
        expect(row.locator("[data-col=state]")).to_have_text("running")
        expect(row.locator("[data-col=mode]")).to_have_text("confirm")
        expect(row.locator("[data-col=prefetch]")).to_have_text("7")
        expect(row.locator("[data-col=user]")).to_have_text("guest")
        screenshot(page, "channels")
    finally:
        connection.close()


def test_closing_a_connection_with_a_reason_reaches_the_pika_client(
        broker: BrokerProcess, page: Page) -> None:
    connection = pika_connection(broker, "ui-closed")
    try:
        name = connection_name(broker, "ui-closed")
        log_in(page, broker.url, "guest", "guest", "#/connections")
        page.locator("[data-page=connections] input.filter").fill(name)
        page.locator(f'[data-table=connections] tr[data-key="{name}"] button').click()
        form = page.locator("[data-form=close-connection]")
        expect(form.locator("input[name=name]")).to_have_value(name)
        form.locator("input[name=reason]").fill("maintenance from the UI")
        form.locator("button[type=submit]").click()
        expect(form.locator(".note")).to_contain_text("closed")
        deadline = time.monotonic() + 5
        with pytest.raises(ConnectionClosedByBroker) as closed:
            while time.monotonic() < deadline:
                connection.process_data_events(time_limit=0.1)
        assert closed.value.reply_code == 320
        assert closed.value.reply_text == "CONNECTION_FORCED - maintenance from the UI"
        # Gone at the page's next refresh after the client answered the close: within two
        # refresh periods (5 s each), without a reload.
        expect(page.locator(f'[data-table=connections] tr[data-key="{name}"]')
               ).to_have_count(0, timeout=12_000)
    finally:
        if connection.is_open:
            connection.close()
