"""export: write orders as CSV for the accounting spreadsheet.

    python export.py orders.json > orders.csv

CSV (RFC 4180) on stdout: a header row, then one row per order, in the input's order.
"""

import csv
import io
import json
import sys

FIELDS = ["id", "customer", "note", "total"]


def to_csv(orders: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(FIELDS)
    for order in orders:
        writer.writerow([order[field] for field in FIELDS])
    return out.getvalue()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as f:
        orders = json.load(f)
    sys.stdout.reconfigure(newline="")  # the rows end in CRLF already
    sys.stdout.write(to_csv(orders))
    return 0


if __name__ == "__main__":
    sys.exit(main())
