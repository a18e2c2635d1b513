"""`FederationLinks`: the federation links and shovels this node runs, kept in step
with the metadata.

Every applied change that can move the plan (a policy, a federation parameter, an
exchange, a vhost, a node's liveness) makes the node compute the plan again
(`link_plan`) and start, stop or restart links to match it: a policy added,
changed or cleared takes effect live, without a restart. A binding added or
removed downstream goes to the running links of its exchange. Dynamic shovels
(`shovel` parameters) are links too, started, changed and stopped the same way;
a shovel that finished its `src-delete-after` clears its own parameter. In a
cluster only the node `runner_of` names runs a link or shovel; when that node
goes down, the liveness change moves it to the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from logbroker.federation.exchange_link import ExchangeLink, LocalExchange
from logbroker.federation.link_plan import LinkKey, LinkPlan, plan_exchange_links, runner_of
from logbroker.federation.queue_link import LocalQueueSide, QueueLink
from logbroker.federation.shovel_link import LocalShovelSide, ShovelLink, ShovelSpec
from logbroker.metadata import (
    Applied,
    BindingAdded,
    BindingRemoved,
    ExchangeDeclared,
    ExchangeDeleted,
    MetadataState,
    NodeLivenessChanged,
    ParameterChanged,
    PolicyChanged,
    QueueDeclared,
    QueueDeleted,
    QueuePlacementChanged,
    VhostDeleted,
)
from logbroker.metadata.parameters import SHOVEL
from segments.clock import SYSTEM_CLOCK, Clock

__all__ = ["FederationLinks"]

logger = logging.getLogger(__name__)
_PLAN_EVENTS = (PolicyChanged, ParameterChanged, ExchangeDeclared, ExchangeDeleted,
                QueueDeclared, QueueDeleted, QueuePlacementChanged, VhostDeleted,
                NodeLivenessChanged)


class LocalSide(LocalExchange, LocalQueueSide, LocalShovelSide, Protocol):
    """The downstream broker as links and shovels see it."""


class FederationLinks:
    def __init__(self, local: LocalSide, state: Callable[[], MetadataState],
                 up_nodes: Callable[[], Iterable[str]] | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._local = local
        self._state = state
        self._up_nodes = up_nodes  # None: a standalone node runs every link
        self._clock = clock
        self._links: dict[LinkKey, ExchangeLink | QueueLink] = {}
        self._shovels: dict[tuple[str, str], ShovelLink] = {}
        self._plan = LinkPlan()
        self._stopping: set[asyncio.Future[None]] = set()

    def on_applied(self, applied: Applied) -> None:
        if any(isinstance(event, _PLAN_EVENTS) for event in applied.events):
            self.refresh()
        for event in applied.events:
            if isinstance(event, BindingAdded | BindingRemoved):
                self._bindings_changed(event.vhost, event.binding.source)

    def refresh(self) -> None:
        self._refresh_links()
        self._refresh_shovels()

    def _refresh_links(self) -> None:
        self._plan = plan_exchange_links(self._state())
        wanted = {key: upstream for key, upstream in self._plan.links.items()
                  if self._link_runs_here(key)}
        for key, running in list(self._links.items()):
            if wanted.get(key) != running.upstream:
                del self._links[key]
                self._stop(running)
        for key, upstream in wanted.items():
            if key not in self._links:
                link: ExchangeLink | QueueLink = (
                    QueueLink(key, upstream, self._local, self._clock) if key.kind == "queue"
                    else ExchangeLink(key, upstream, self._local, self._clock))
                self._links[key] = link
                link.start()
                logger.info("federation link %s %s/%s <- upstream %s started", key.kind,
                            key.vhost, key.exchange, key.upstream)

    def _refresh_shovels(self) -> None:
        state = self._state()
        wanted = {(vhost.name, name): ShovelSpec.of(vhost.name, name, value)
                  for vhost in state.vhosts()
                  for _, name, value in state.parameters(vhost.name, SHOVEL)
                  if self._runs_here((vhost.name, SHOVEL, name))}
        for key, shovel in list(self._shovels.items()):
            if wanted.get(key) != shovel.spec:
                del self._shovels[key]
                self._stop(shovel)
        for key, spec in wanted.items():
            if key not in self._shovels:
                shovel = ShovelLink(spec, self._local, self._clock)
                self._shovels[key] = shovel
                shovel.start()
                logger.info("shovel %s/%s started", *key)

    def _link_runs_here(self, key: LinkKey) -> bool:
        """A federated queue's links run on its leader; an exchange's on its runner."""
        if key.kind == "queue" and self._up_nodes is not None:
            return self._plan.leaders.get(key) == self._local.node_name
        return self._runs_here((key.vhost, key.exchange, key.upstream))

    def _runs_here(self, key: tuple[str, ...]) -> bool:
        if self._up_nodes is None:
            return True
        return runner_of(key, self._up_nodes()) == self._local.node_name

    def _bindings_changed(self, vhost: str, exchange: str) -> None:
        for key, link in self._links.items():
            if key.vhost == vhost and key.exchange == exchange:
                link.bindings_changed()

    def _stop(self, link: ExchangeLink | QueueLink | ShovelLink) -> None:
        stopping = asyncio.ensure_future(link.stop())
        self._stopping.add(stopping)
        stopping.add_done_callback(self._stopping.discard)

    def shovel_statuses(self, vhost: str | None = None) -> list[dict[str, Any]]:
        """RabbitMQ's /api/shovels rows for the shovels this node runs."""
        rows = []
        for (shovel_vhost, name), shovel in sorted(self._shovels.items()):
            if vhost not in (None, shovel_vhost):
                continue
            status, spec = shovel.status, shovel.spec
            row: dict[str, Any] = {
                "node": self._local.node_name, "vhost": shovel_vhost, "name": name,
                "type": "dynamic", "state": status.state, "timestamp": status.since_ms,
                "src_uri": status.uri, "src_queue": spec.src_queue,
                "src_exchange": spec.src_exchange, "dest_queue": spec.dest_queue,
                "dest_exchange": spec.dest_exchange, "messages": status.messages}
            if status.error:
                row["reason"] = status.error
            rows.append(row)
        return rows

    async def stop_all(self) -> None:
        links: list[ExchangeLink | QueueLink | ShovelLink] = [*self._links.values(),
                                                              *self._shovels.values()]
        self._links, self._shovels = {}, {}
        await asyncio.gather(*(link.stop() for link in links), *self._stopping)

    def link_statuses(self, vhost: str | None = None) -> list[dict[str, Any]]:
        """The links this node runs."""
        return [link.status.view(self._local.node_name)
                for key, link in sorted(self._links.items()) if vhost in (None, key.vhost)]

    def missing_statuses(self, vhost: str | None = None) -> list[dict[str, Any]]:
        """What the plan could not make a link of (the same on every node)."""
        return [{"node": self._local.node_name, "vhost": v, "exchange": x,
                 "type": "exchange", "status": "error", "error": why}
                for (v, x), why in sorted(self._plan.missing.items()) if vhost in (None, v)]
