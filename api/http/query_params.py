"""Refusing a query parameter that the route does not declare, and the RabbitMQ list
parameters that list routes accept and ignore.

Why: FastAPI ignores an unknown query parameter, so a misspelt or misplaced one
(`?limit=1` on replay, which takes `max_messages`) changed nothing and said
nothing. `refuse_unknown_query`, an app-wide dependency, compares the request's
query keys with the query parameters the matched route declares (its own and its
dependencies', by alias) and answers 400 naming the first unknown one.

RabbitMQ's management API takes filtering, sorting and paging parameters on its
list routes, and its tools and UI send them. `rabbitmq_list_options` declares
them on our list routes so that such requests keep working; they are accepted and
ignored (the whole list is returned, unfiltered, unsorted and unpaged).
"""

from __future__ import annotations

from fastapi import Depends, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import HTTPConnection

from api.http.http_errors import ApiError

__all__ = ["ListOptions", "rabbitmq_list_options", "refuse_unknown_query"]

_IGNORED = "accepted for RabbitMQ compatibility and ignored"


def _declared(dependant: Dependant) -> set[str]:
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _declared(sub)
    return names


async def refuse_unknown_query(connection: HTTPConnection) -> None:
    """App-wide dependency: a query parameter the route does not declare is a 400.

    The WebSocket endpoint reads its own (`vhost`, `user`, `password`) and is not checked.
    """
    if not isinstance(connection, Request) or not connection.query_params:
        return
    route = connection.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = _declared(route.dependant)  # a few nodes, walked only when there is a query
    for key in connection.query_params:
        if key not in known:
            accepted = ", ".join(sorted(known)) or "none"
            raise ApiError(400, f"unknown query parameter '{key}' (this path takes: "
                                f"{accepted})", key)


async def rabbitmq_list_options(
    columns: str | None = Query(None, description=_IGNORED),
    page: str | None = Query(None, description=_IGNORED),
    page_size: str | None = Query(None, description=_IGNORED),
    # Not `name`: routes such as /api/queues/{vhost}/{name}/bindings have a path `name`.
    name_filter: str | None = Query(None, alias="name", description=_IGNORED),
    use_regex: str | None = Query(None, description=_IGNORED),
    sort: str | None = Query(None, description=_IGNORED),
    sort_reverse: str | None = Query(None, description=_IGNORED),
    disable_stats: str | None = Query(None, description=_IGNORED),
    enable_queue_totals: str | None = Query(None, description=_IGNORED),
) -> None:
    """Route dependency of the list routes: RabbitMQ's list parameters, ignored."""


#: `dependencies=[ListOptions]` on a list route.
ListOptions = Depends(rabbitmq_list_options)
