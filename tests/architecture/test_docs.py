"""The documentation: the generated reference pages match their sources, the site builds with
`mkdocs build --strict` (no broken link, no page left out of the navigation), and the README stays
a short front page whose links lead somewhere."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README_LIMIT = 12 * 1024


def gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_pages_match_their_sources():
    """Checked in a process of its own: this one holds the tests' own methods (tests/support/lookback.py),
    whose flags and records are no part of the pages."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_names_a_stale_page_and_the_script(tmp_path, monkeypatch):
    module = gen_docs()
    for name in module.PAGES:
        (tmp_path / name).write_text("", encoding="utf-8")
    monkeypatch.setattr(module, "REFERENCE", tmp_path)
    monkeypatch.setattr(module, "PAGES", {"cli.md": module.cli_page})
    (tmp_path / "cli.md").write_text(module.cli_page(), encoding="utf-8")
    assert module.stale_pages() == []
    (tmp_path / "cli.md").write_text(module.cli_page() + "edited by hand\n", encoding="utf-8")
    assert module.stale_pages() == ["cli.md"]


def test_a_changed_source_changes_its_page(monkeypatch):
    """The page is derived from the source as it is now: a flag added to the parser is in the CLI page."""
    import tui_decode.cli.main as cli

    before = gen_docs().cli_page()
    build = cli.build_parser

    def with_a_new_flag():
        parser = build()
        parser.add_argument("--a-flag-not-documented", help="what the new flag does")
        return parser

    monkeypatch.setattr(cli, "build_parser", with_a_new_flag)
    after = gen_docs().cli_page()
    assert after != before and "| `--a-flag-not-documented` |" in after and "what the new flag does" in after


def test_the_cli_page_lists_every_subcommand_and_flag():
    from tui_decode.cli.main import build_parser

    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sub in subparsers.choices.items():
        assert f"## tui-decode {name}" in page
        for action in sub._actions:
            for flag in set(action.option_strings) - {"-h", "--help"}:
                assert f"`{flag}`" in page, (name, flag)


def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: `pip install -e .[test]` installs mkdocs-material")
    pytest.importorskip("material", reason="mkdocs-material is not installed: `pip install -e .[test]` installs it")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
    assert (tmp_path / "site" / "screenshots" / "spec.svg").is_file()  # the hook brings the README's screenshots


def test_the_readme_is_a_short_front_page_whose_links_lead_somewhere():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= README_LIMIT, f"README.md is {len(text.encode())} bytes: move detail into docs/"
    assert "./scripts/setup.sh && .venv/bin/tui-decode" in text and "./scripts/setup.sh && .venv/bin/python -m pytest" in text
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 10
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert missing == [], missing


def test_every_results_page_is_dated_and_listed():
    results = ROOT / "docs" / "results"
    index = (results / "index.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in results.glob("*.md") if p.name != "index.md")
    assert pages
    for name in pages:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md", name), f"{name}: name a results page YYYY-MM-DD-subject.md"
        assert f"]({name})" in index, f"list {name} in docs/results/index.md"
