"""mkdocs hooks (named in mkdocs.yml): the site shows the screenshots `scripts/screenshots.py` writes
to `screenshots/` at the repository's root (where the README shows them too), without a copy in docs/."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"


def on_files(files: Files, config) -> Files:
    for path in sorted(SCREENSHOTS.glob("*.svg")):
        files.append(File.generated(config, f"screenshots/{path.name}", abs_src_path=str(path)))
    return files
