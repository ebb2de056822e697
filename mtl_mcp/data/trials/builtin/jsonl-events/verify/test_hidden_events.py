import pytest

from events import BadRecord, read_events


def write(tmp_path, text):
    path = tmp_path / "events.jsonl"
    path.write_bytes(text.encode("utf-8"))
    return path


def test_blank_and_whitespace_lines_anywhere_are_skipped(tmp_path):
    path = write(tmp_path, '\n{"a": 1}\n   \n\t\n{"b": 2}\r\n\n')
    assert read_events(path) == [{"a": 1}, {"b": 2}]


def test_an_empty_file_has_no_events(tmp_path):
    assert read_events(write(tmp_path, "")) == []


def test_the_line_number_counts_the_blank_lines_too(tmp_path):
    path = write(tmp_path, '{"a": 1}\n\n\n{"b": 2}\n{"c": \n')
    with pytest.raises(BadRecord) as caught:
        read_events(path)
    assert caught.value.line == 5
    assert "line 5" in str(caught.value)


@pytest.mark.parametrize("record", ["[1, 2]", '"just text"', "42", "null", "true"])
def test_json_that_is_not_an_object_is_a_bad_record(tmp_path, record):
    path = write(tmp_path, '{"ok": true}\n' + record + "\n")
    with pytest.raises(BadRecord) as caught:
        read_events(path)
    assert caught.value.line == 2


def test_a_bad_record_is_still_a_value_error(tmp_path):
    with pytest.raises(ValueError):
        read_events(write(tmp_path, "{oops}\n"))
