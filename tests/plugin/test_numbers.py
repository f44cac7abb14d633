"""The one integer parser of the project: ASCII decimal digits or nothing (runs on Python 3.8 too).

``str.isdigit`` says yes to '²' and '٣', which ``int`` refuses or reads as another number; ``int`` says
yes to '1_000', ' 1' and '+1'. Every one of those is text from outside (a label, a file name, an
environment variable): each must read as no number at all.
"""

import unittest

from msmonitor_contract.numbers import MAX_DIGITS, strict_int

NOT_INTEGERS = ("²", "²³", "٣", "1٣", "1_000", " 1", "1 ", "+1", "", "-", "--5", "1.0", "0x10", "١٢")


class StrictIntTest(unittest.TestCase):
    def test_ascii_digits_read_as_int_reads_them(self):
        for text in ("0", "7", "0042", "65535", "4294967295", "9" * 30):
            self.assertEqual(strict_int(text), int(text), text)

    def test_anything_else_is_no_number(self):
        for text in (*NOT_INTEGERS, "-1"):
            self.assertIsNone(strict_int(text), repr(text))

    def test_a_minus_sign_only_where_the_caller_takes_negatives(self):
        self.assertEqual(strict_int("-1", negative=True), -1)
        self.assertEqual(strict_int("12", negative=True), 12)
        for text in (*NOT_INTEGERS, "-²", "-+1", "- 1"):
            self.assertIsNone(strict_int(text, negative=True), repr(text))

    def test_more_digits_than_pythons_bound_is_no_number_on_every_version(self):
        self.assertEqual(strict_int("1" * MAX_DIGITS), int("1" * MAX_DIGITS))
        self.assertIsNone(strict_int("1" * (MAX_DIGITS + 1)))
        self.assertIsNone(strict_int("1" * 100_000))


if __name__ == "__main__":
    unittest.main()
