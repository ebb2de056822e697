import subprocess
import sys
from pathlib import Path


def run(*args, cwd):
    return subprocess.run([sys.executable, str(Path.cwd() / "checklinks.py"), *args],
                          cwd=cwd, capture_output=True, text=True)


def test_every_broken_link_is_listed_and_the_status_is_1(tmp_path):
    (tmp_path / "a.md").write_text("[x](gone.md) and [y](missing.png)\n[z](nope.md)\n",
                                   encoding="utf-8")
    done = run("a.md", cwd=tmp_path)
    assert done.stdout == "a.md:1: gone.md\na.md:1: missing.png\na.md:2: nope.md\n"
    assert done.returncode == 1


def test_many_broken_links_still_exit_1(tmp_path):
    (tmp_path / "big.md").write_text("".join(f"[l{i}](p{i}.md)\n" for i in range(256)),
                                     encoding="utf-8")
    assert run("big.md", cwd=tmp_path).returncode == 1


def test_broken_links_across_several_files_exit_1(tmp_path):
    (tmp_path / "ok.md").write_text("[self](ok.md)\n", encoding="utf-8")
    (tmp_path / "bad.md").write_text("[x](gone.md)\n", encoding="utf-8")
    done = run("ok.md", "bad.md", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == "bad.md:1: gone.md\n"


def test_clean_docs_exit_0(tmp_path):
    (tmp_path / "ok.md").write_text("[web](https://example.com) [mail](mailto:a@b.c)\n",
                                    encoding="utf-8")
    done = run("ok.md", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "")


def test_an_unreadable_file_exits_2_with_a_message_not_a_traceback(tmp_path):
    done = run("absent.md", cwd=tmp_path)
    assert done.returncode == 2
    assert "absent.md" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
