from pathlib import Path

from contacts import Contact, load_contacts

DATA = Path(__file__).parent / "data"


def test_plain_rows():
    assert load_contacts(DATA / "simple.csv")[0] == Contact(
        "Ada Lovelace", "ada@example.com", "Analytical Engines"
    )


def test_a_quoted_name_with_commas():
    assert load_contacts(DATA / "simple.csv")[1].name == "Smith, Jr., John"
