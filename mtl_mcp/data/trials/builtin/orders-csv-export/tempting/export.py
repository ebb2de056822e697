"""export: write orders as CSV for the accounting spreadsheet.

    python export.py orders.json > orders.csv

CSV (RFC 4180) on stdout: a header row, then one row per order, in the input's order.
"""

import json
import sys

FIELDS = ["id", "customer", "note", "total"]


def to_csv(orders: list[dict]) -> str:
    lines = [",".join(FIELDS)]
    for order in orders:
        lines.append(",".join(f'"{order[field]}"' for field in FIELDS))
    return "\n".join(lines) + "\n"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as f:
        orders = json.load(f)
    sys.stdout.write(to_csv(orders))
    return 0


if __name__ == "__main__":
    sys.exit(main())
