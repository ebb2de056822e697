from pathlib import Path

from contacts import Contact, load_contacts

DATA = Path(__file__).parent / "data"

EXPORT = [
    Contact("Smith, Jr., John", "john.smith@example.com", "Acme Ltd"),
    Contact("Zoë Brandt", "zoe@example.de", "Brandt & Söhne, GmbH"),
    Contact('Olu "Ace" Adebayo', "olu@example.ng", 'Acme "Rockets"'),
    Contact("Ana Lima", "ana@example.br", "Lima Consulting"),
]


def test_the_real_export_loads_whole():
    """As the CRM writes it: a byte order mark, Windows line endings, doubled quotes."""
    raw = (DATA / "crm_export.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw
    assert load_contacts(DATA / "crm_export.csv") == EXPORT


def test_the_same_export_without_a_byte_order_mark(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_bytes((DATA / "crm_export.csv").read_bytes().removeprefix(b"\xef\xbb\xbf"))
    assert load_contacts(plain) == EXPORT


def test_a_quoted_field_may_span_lines():
    assert load_contacts(DATA / "multiline.csv") == [
        Contact("Ana Lima", "ana@example.br", "Lima\nConsulting"),
        Contact("Bo Chen", "bo@example.cn", "Chen Foods"),
    ]


def test_columns_in_another_order():
    assert load_contacts(DATA / "reordered.csv") == [
        Contact("Kim Min-jun", "kim@example.kr", "Kim, Park & Co"),
        Contact("Lee, Seo-yeon", "lee@example.kr", "Lee Labs"),
    ]


def test_blank_lines_anywhere_are_skipped(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("name,email,company\n\nA,a@x,X\n\n\nB,b@x,Y\n\n", encoding="utf-8")
    assert [c.name for c in load_contacts(path)] == ["A", "B"]
