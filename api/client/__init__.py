"""The logbroker client library: REST + WebSocket, async (`AsyncClient`) and sync (`Client`).

Only httpx, websockets and the standard library: it runs anywhere (Spark
executors included) and never imports the broker. Give it one URL or several
(`http://USER:PASS@HOST:PORT`, comma-separated or a list) for failover;
without any it reads `LOGBROKER_URL`, else uses `http://guest:guest@127.0.0.1:15672`.
"""

from api.client.async_client import AsyncClient
from api.client.client_tls import client_tls_context
from api.client.errors import (
    AccessRefused,
    BadRequest,
    ConnectionFailed,
    InvalidUrl,
    LogbrokerError,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    ResourceLocked,
    Unauthorized,
    Unavailable,
)
from api.client.messages import (
    GotMessage,
    NodeStatus,
    OutgoingMessage,
    PublishResult,
    Record,
    ReplayPage,
    SettleResult,
)
from api.client.sync_client import Client
from api.client.sync_streams import SyncConsumer, SyncDelivery, SyncPublisher, SyncReplay
from api.client.urls import DEFAULT_URL, ENV_VAR, Node, parse_url, parse_urls
from api.client.ws_publisher import AsyncPublisher
from api.client.ws_streams import AsyncConsumer, AsyncReplayStream, Delivery

__all__ = [
    "DEFAULT_URL", "ENV_VAR", "AccessRefused", "AsyncClient", "AsyncConsumer", "AsyncPublisher",
    "AsyncReplayStream", "BadRequest", "Client", "ConnectionFailed", "Delivery", "GotMessage",
    "InvalidUrl", "LogbrokerError", "Node", "NodeStatus", "NotFound", "OutgoingMessage",
    "PayloadTooLarge", "ProtocolError", "PublishResult", "Record", "ReplayPage",
    "ResourceLocked", "SettleResult", "SyncConsumer", "SyncDelivery", "SyncPublisher",
    "SyncReplay", "Unauthorized", "Unavailable", "client_tls_context", "parse_url",
    "parse_urls",
]
