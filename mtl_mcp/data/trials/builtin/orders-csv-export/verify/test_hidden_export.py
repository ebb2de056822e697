import csv
import io
import json
import subprocess
import sys
from pathlib import Path

from export import to_csv

TRICKY = [
    {"id": 1, "customer": "Smith, John", "note": 'said "rush it"', "total": "99.00"},
    {"id": 2, "customer": "O'Brien", "note": "line one\nline two", "total": "5.00"},
    {"id": 3, "customer": "Zoë Ünal", "note": '"', "total": "0.10"},
    {"id": 4, "customer": "Plain", "note": "", "total": "1"},
]


def rows(text):
    return list(csv.DictReader(io.StringIO(text, newline="")))


def test_every_field_round_trips_through_a_csv_reader():
    back = rows(to_csv(TRICKY))
    assert [dict(row) for row in back] == [
        {key: str(value) for key, value in order.items()} for order in TRICKY
    ]


def test_the_header_is_unchanged():
    assert next(csv.reader(io.StringIO(to_csv(TRICKY)))) == ["id", "customer", "note", "total"]


def test_the_command_writes_the_same_csv(tmp_path):
    source = tmp_path / "orders.json"
    source.write_text(json.dumps(TRICKY), encoding="utf-8")
    done = subprocess.run([sys.executable, str(Path.cwd() / "export.py"), str(source)],
                          capture_output=True, check=True)
    back = rows(done.stdout.decode("utf-8"))
    assert [row["note"] for row in back] == [order["note"] for order in TRICKY]
    assert [row["customer"] for row in back] == [order["customer"] for order in TRICKY]
