import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
STOCK = Path(__file__).parent / "data" / "stock.csv"


def run(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "inventory.py"), *args],
        capture_output=True, text=True, check=True,
    )


def test_json_output_parses():
    items = json.loads(run(str(STOCK), "--json").stdout)
    assert [item["sku"] for item in items] == ["A-100", "B-200"]


def test_table_lists_priced_items():
    assert "Gizmo" in run(str(STOCK)).stdout
