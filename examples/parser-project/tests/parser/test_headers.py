"""unittest style, so `python -m loopkit.testing.demo` runs these with no test runner
installed; pytest runs them as they are."""

import unittest

from parser.headers import parse_headers


class HeaderTests(unittest.TestCase):
    def test_reads_name_value_lines(self) -> None:
        self.assertEqual(
            parse_headers("Host: example.org\nAccept: */*"),
            {"host": "example.org", "accept": "*/*"},
        )

    def test_blank_line_ends_headers(self) -> None:
        message = "Host: example.org\n\nthis is the body: not a header\n"
        self.assertEqual(parse_headers(message), {"host": "example.org"})
