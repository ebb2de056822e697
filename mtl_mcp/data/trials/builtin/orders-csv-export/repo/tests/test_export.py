import csv
import io

from export import to_csv

ORDERS = [
    {"id": 1, "customer": "Ada Lovelace", "note": "", "total": "12.50"},
    {"id": 2, "customer": "Smith, John", "note": "gift wrap", "total": "99.00"},
]


def test_a_header_then_one_row_per_order():
    rows = list(csv.reader(io.StringIO(to_csv(ORDERS))))
    assert rows[0] == ["id", "customer", "note", "total"]
    assert len(rows) == 3


def test_a_name_with_a_comma_stays_in_its_column():
    rows = list(csv.reader(io.StringIO(to_csv(ORDERS))))
    assert rows[2] == ["2", "Smith, John", "gift wrap", "99.00"]
