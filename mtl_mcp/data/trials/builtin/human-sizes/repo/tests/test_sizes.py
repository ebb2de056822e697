from sizes import human_size, listing


def test_bytes_are_whole():
    assert human_size(512) == "512 B"


def test_kibibytes():
    assert human_size(1536) == "1.5 KiB"


def test_listing():
    assert listing({"a.txt": 2048}) == "   2.0 KiB  a.txt\n"
