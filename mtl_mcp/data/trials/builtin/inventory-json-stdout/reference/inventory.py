"""inventory: list the stock in a CSV file.

    python inventory.py stock.csv           a table, for people
    python inventory.py stock.csv --json    a JSON array, for scripts
"""

import argparse
import csv
import json
import sys


def load(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="inventory")
    parser.add_argument("path")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    items = []
    for row in load(args.path):
        if not row["price"]:
            # stderr: stdout carries the data, and must stay parseable with --json
            print(f"warning: {row['sku']} has no price, skipped", file=sys.stderr)
            continue
        items.append(
            {"sku": row["sku"], "name": row["name"], "qty": int(row["qty"]),
             "price": float(row["price"])}
        )
    if args.json:
        print(json.dumps(items, indent=2))
    else:
        for item in items:
            print(f"{item['sku']:<8} {item['name']:<20} {item['qty']:>5} {item['price']:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
