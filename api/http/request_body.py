"""`RequestBody`: the base of every JSON request body the HTTP API reads.

Strict: a boolean or a number must have its JSON type. Pydantic's lax mode reads
`{"durable": "yes"}` as true and `{"count": "5"}` as 5, so a typo or a
misunderstanding became a queue that was declared unlike the client meant; now
it is a 400 naming the field. Fields that take several types say so in their
annotation (`str | list[str]`), which strict mode keeps.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["RequestBody"]


class RequestBody(BaseModel):
    model_config = ConfigDict(strict=True)
