from settings import layered, merge


def test_a_nested_key_keeps_its_siblings():
    merged = merge({"db": {"host": "localhost", "port": 5432}}, {"db": {"port": 6543}})
    assert merged == {"db": {"host": "localhost", "port": 6543}}


def test_top_level_values_are_replaced():
    assert merge({"workers": 4}, {"workers": 8}) == {"workers": 8}


def test_layers_apply_in_order():
    assert layered({"workers": 8}, {"workers": 16})["workers"] == 16
