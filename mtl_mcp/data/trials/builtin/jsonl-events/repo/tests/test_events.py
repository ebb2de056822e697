import pytest

from events import BadRecord, read_events


def write(tmp_path, text):
    path = tmp_path / "events.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_trailing_blank_line_is_skipped(tmp_path):
    path = write(tmp_path, '{"event": "start"}\n{"event": "stop"}\n\n')
    assert read_events(path) == [{"event": "start"}, {"event": "stop"}]


def test_a_corrupt_line_is_named(tmp_path):
    path = write(tmp_path, '{"event": "start"}\n{"event": "sto\n{"event": "end"}\n')
    with pytest.raises(BadRecord) as caught:
        read_events(path)
    assert caught.value.line == 2
