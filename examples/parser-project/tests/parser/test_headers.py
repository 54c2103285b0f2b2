from parser.headers import parse_headers


def test_reads_name_value_lines() -> None:
    assert parse_headers("Host: example.org\nAccept: */*") == {
        "host": "example.org",
        "accept": "*/*",
    }


def test_blank_line_ends_headers() -> None:
    message = "Host: example.org\n\nthis is the body: not a header\n"
    assert parse_headers(message) == {"host": "example.org"}
