import json
import subprocess
import sys
from pathlib import Path

STOCK = "sku,name,qty,price\nA-100,Widget,12,2.50\nA-101,Gadget,3,\nB-200,Gizmo,7,19.99\nC-1,Zoë's café set,1,\n"


def run(tmp_path, *args):
    path = tmp_path / "stock.csv"
    path.write_text(STOCK, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(Path.cwd() / "inventory.py"), str(path), *args],
        capture_output=True, text=True, encoding="utf-8",
    )
    assert done.returncode == 0, done.stderr
    return done


def test_json_stdout_is_exactly_one_json_document(tmp_path):
    items = json.loads(run(tmp_path, "--json").stdout)
    assert items == [
        {"sku": "A-100", "name": "Widget", "qty": 12, "price": 2.5},
        {"sku": "B-200", "name": "Gizmo", "qty": 7, "price": 19.99},
    ]


def test_json_mode_still_warns_on_stderr(tmp_path):
    stderr = run(tmp_path, "--json").stderr
    assert "A-101" in stderr and "no price" in stderr
    assert "C-1" in stderr


def test_table_mode_still_shows_the_table_and_the_warnings(tmp_path):
    done = run(tmp_path)
    assert "A-100    Widget                  12     2.50" in done.stdout
    assert "Gizmo" in done.stdout
    assert "A-101" in done.stdout + done.stderr and "C-1" in done.stdout + done.stderr
