"""Import contacts from the CRM's CSV export (an example: samples/crm_export.csv)."""

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
    contacts = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().strip().split(",")
        for line in f:
            line = line.strip()
            if not line:
                continue
            row = dict(zip(header, line.split(",")))
            contacts.append(Contact(row["name"], row["email"], row["company"]))
    return contacts
