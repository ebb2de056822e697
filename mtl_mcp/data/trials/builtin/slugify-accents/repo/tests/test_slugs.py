from slugs import slugify


def test_punctuation_separates_words():
    assert slugify("Hello, World!") == "hello-world"


def test_accents_keep_their_letter():
    assert slugify("Café au lait") == "cafe-au-lait"


def test_long_titles_are_cut_at_a_word():
    assert slugify("one two three four", max_length=9) == "one-two"
