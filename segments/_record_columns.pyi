from collections.abc import Callable, Sequence

from segments.record_columns import Headers, Record

def encode(
    records: Sequence[Record], encode_headers: Callable[[Headers], bytes]
) -> tuple[bytes, int, int, int] | None: ...

def encode_batch(
    records: Sequence[Record], encode_headers: Callable[[Headers], bytes], base_offset: int
) -> tuple[bytes, bytes, int, int] | None: ...
