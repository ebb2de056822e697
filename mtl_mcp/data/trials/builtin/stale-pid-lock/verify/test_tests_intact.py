"""The repo's own tests are all still there and unedited (adding new tests is fine)."""

import ast
from pathlib import Path

ORIGINALS = Path(__file__).parent / "originals"


def statements(source):
    """Each top-level statement but the imports, as a comparable dump."""
    tree = ast.parse(source)
    skipped = (ast.Import, ast.ImportFrom)
    return [ast.dump(node) for node in tree.body if not isinstance(node, skipped)]


def test_the_repos_own_tests_are_unedited():
    originals = sorted(ORIGINALS.rglob("*.orig"))
    assert originals, "no originals kept"
    for original in originals:
        name = original.relative_to(ORIGINALS).with_suffix("").as_posix()
        current = Path.cwd() / name
        assert current.is_file(), f"{name} was deleted"
        kept = statements(current.read_text(encoding="utf-8"))
        for statement in statements(original.read_text(encoding="utf-8")):
            assert statement in kept, f"{name}: a test or fixture was removed or edited"
