"""/api/definitions: export and import in RabbitMQ's definitions JSON format."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Response

from api.http.api_context import ApiContext, api_context
from api.http.auth import Principal, admin_user
from api.http.http_errors import ApiError
from api.http.views import jsonable
from logbroker.definitions_check import checked_import
from logbroker.definitions_document import DefinitionsError, export_definitions
from logbroker.errors import BrokerError

router = APIRouter(tags=["definitions"])
Context = Depends(api_context)
Admin = Depends(admin_user)


@router.get("/api/definitions")
async def get_definitions(ctx: ApiContext = Context, _who: Principal = Admin) -> dict[str, Any]:
    # Arguments declared over AMQP may hold bytes, decimals or timestamps: as JSON,
    # like every other view of them (a bytes value is not UTF-8 text as it stands).
    exported: dict[str, Any] = jsonable(export_definitions(ctx.broker.state))
    return exported


@router.post("/api/definitions", status_code=204)
async def post_definitions(document: dict[str, Any] = Body(...), ctx: ApiContext = Context,  # noqa: B008
                     _who: Principal = Admin) -> Response:
    """Import: declares everything the document names (additive, like RabbitMQ's import);
    a document with one entry the broker would refuse is refused whole, nothing applied."""
    try:
        commands = checked_import(ctx.broker.state, document)
    except DefinitionsError as error:
        raise ApiError(400, str(error), "body") from error
    for command in commands:
        try:
            await ctx.broker.apply(command)
        except BrokerError as error:
            raise ApiError(400, f"{type(command).__name__} {getattr(command, 'name', '')}: "
                                f"{error.text}") from error
    return Response(status_code=204)
