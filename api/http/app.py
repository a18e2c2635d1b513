"""The FastAPI app: RabbitMQ-shaped management paths, data-plane paths, WebSocket, metrics."""

from __future__ import annotations

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline

from api.http.api_context import ApiContext
from api.http.body_limit import BodyLimitMiddleware
from api.http.http_errors import install_error_handlers
from api.http.path_names import EncodedSlashMiddleware
from api.http.query_params import refuse_unknown_query
from api.http.routes import (
    access,
    bindings,
    cluster,
    connections,
    consumer_groups,
    data_plane,
    definitions,
    exchanges,
    federation,
    metrics,
    overview,
    parameters,
    policies,
    producers,
    queue_actions,
    queues,
    replay,
    websocket,
)
from api.http.routes.ui import install_ui
from api.http.text_checks import refuse_unencodable_text

DOCS_ASSETS_PATH = "/docs-assets"


def create_app(context: ApiContext) -> FastAPI:
    # fastapi-offline serves /docs and /redoc with Swagger UI's and Redoc's assets from
    # the package (FastAPI's own pages load them from a CDN: blank without internet).
    app = FastAPIOffline(
        static_url=DOCS_ASSETS_PATH,
        title="logbroker",
        version="0.1.0",
        description="Management (shaped like RabbitMQ's HTTP API), data plane, replay, "
                    "WebSocket at /ws and Prometheus metrics at /metrics.",
        dependencies=[Depends(refuse_unencodable_text), Depends(refuse_unknown_query)],
    )
    app.state.context = context
    install_error_handlers(app)
    for module in (overview, connections, cluster, access, exchanges, queues, queue_actions,
                   bindings, policies, parameters, federation,
                   definitions, data_plane, producers, replay, consumer_groups, metrics,
                   websocket):
        app.include_router(module.router)
    install_ui(app)  # `/`: the management UI, a client of the routes above
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=context.max_body_bytes)
    app.add_middleware(EncodedSlashMiddleware)
    return app
