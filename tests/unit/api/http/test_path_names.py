import pytest

from api.http.path_names import BadPathError, path_name, routable_path


def test_an_encoded_slash_stays_inside_its_segment() -> None:
    assert routable_path("/api/queues/%2F/my%20queue") == "/api/queues/%2F/my queue"
    assert path_name("%2F") == "/"
    assert path_name("my queue") == "my queue"


def test_a_literal_percent_round_trips() -> None:
    routed = routable_path("/api/queues/v/100%25%2Fdone")
    segment = routed.rsplit("/", 1)[1]
    assert path_name(segment) == "100%/done"


@pytest.mark.parametrize("raw", ["/api/queues/%2F/%ED%A0%80", "/api/queues/%2F/%FF", "/api/x/%C3"])
def test_escapes_that_are_not_utf8_are_refused_not_replaced(raw: str) -> None:
    with pytest.raises(BadPathError, match="not UTF-8"):
        routable_path(raw)


def test_utf8_escapes_decode() -> None:
    assert routable_path("/api/queues/%2F/caf%C3%A9") == "/api/queues/%2F/café"
