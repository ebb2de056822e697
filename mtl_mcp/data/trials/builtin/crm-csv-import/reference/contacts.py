"""Import contacts from the CRM's CSV export (an example: samples/crm_export.csv)."""

import csv
from dataclasses import dataclass


@dataclass
class Contact:
    name: str
    email: str
    company: str


def load_contacts(path) -> list[Contact]:
    """Every contact in the export at `path`, in file order.

    The first row is the header and names the columns (name, email, company, in any
    order); blank lines are skipped.
    """
    # utf-8-sig: the CRM starts its exports with a byte order mark; newline="" lets the
    # csv module see line breaks inside quoted fields
    with open(path, encoding="utf-8-sig", newline="") as f:
        return [
            Contact(row["name"], row["email"], row["company"])
            for row in csv.DictReader(f)
            if any(value.strip() for value in row.values() if value)
        ]
