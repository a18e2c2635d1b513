from api.http.path_names import path_name, routable_path


def test_an_encoded_slash_stays_inside_its_segment() -> None:
    assert routable_path("/api/queues/%2F/my%20queue") == "/api/queues/%2F/my queue"
    assert path_name("%2F") == "/"
    assert path_name("my queue") == "my queue"


def test_a_literal_percent_round_trips() -> None:
    routed = routable_path("/api/queues/v/100%25%2Fdone")
    segment = routed.rsplit("/", 1)[1]
    assert path_name(segment) == "100%/done"
