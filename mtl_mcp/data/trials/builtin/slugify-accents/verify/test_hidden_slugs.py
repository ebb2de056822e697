import pytest

from slugs import slugify


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Café au lait", "cafe-au-lait"),
        ("Crème brûlée à la française", "creme-brulee-a-la-francaise"),
        ("Über die Brücke", "uber-die-brucke"),
        ("Ångström units", "angstrom-units"),
        ("naïve façade", "naive-facade"),
        ("Ça va? Très bien!", "ca-va-tres-bien"),
        ("Cafe\u0301 decomposed", "cafe-decomposed"),
        ("ÉCOLE NORMALE", "ecole-normale"),
        ("Hello, World!", "hello-world"),
        ("  --already-a-slug--  ", "already-a-slug"),
        ("", ""),
    ],
)
def test_accents_map_to_their_base_letter(title, slug):
    assert slugify(title) == slug


def test_the_cut_counts_the_plain_letters():
    assert slugify("Élévation économique", max_length=10) == "elevation"


def test_the_result_is_always_ascii():
    assert slugify("Œuvres complètes, tome ½").isascii()
