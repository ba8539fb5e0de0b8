#!/usr/bin/env python3
"""Make an ``asv publish`` HTML site self-contained (no CDN requests).

asv 0.6.6's ``index.html`` loads jQuery, flot (+ plugins), stupidtable,
blueimp-md5 and bootstrap from public CDNs; on an air-gapped machine the page
only shows asv's "Can not determine continental origin of swallow" error.

This script:

1. runs ``npm ci`` (or ``npm install``) in the vendor project directory
   (default: ``tools/asv_offline``, pinned by its package.json/package-lock.json)
   when its ``node_modules`` is missing;
2. copies the needed files into ``HTML_DIR/vendor/<package>/...``;
3. rewrites every known CDN URL in ``HTML_DIR``'s ``*.html`` and ``*.js`` to
   the local vendor path (dropping the now meaningless ``integrity`` /
   ``crossorigin`` / ``referrerpolicy`` attributes);
4. fails (exit 1, one line on stderr) if any external http(s) script/link
   URL remains.

It is idempotent; ``asv publish`` regenerates the HTML, so rerun it after
every publish.  ``--check`` only performs step 4.

Usage::

    python tools/asv_offline.py HTML_DIR [--vendor-dir DIR] [--check]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

VENDOR_SUBDIR = "vendor"
DEFAULT_VENDOR_DIR = Path(__file__).resolve().parent / "asv_offline"


class Asset(NamedTuple):
    """One CDN URL and the file in node_modules that replaces it."""

    url: str
    package: str  # npm package name (directory under node_modules)
    path: str  # file path inside the package


# URLs referenced by asv 0.6.6 (asv/www/index.html).  Versions are pinned in
# tools/asv_offline/package.json.  Byte-identical to the CDN files (SRI hash
# verified): jquery, flot-orderbars, blueimp-md5, bootstrap js/css.  flot
# 0.8.3 on npm ships only unminified sources (same release), and stupidtable
# 1.0.1 is not on npm, so stupid-table-plugin 1.1.3 (same API) is used.
ASSETS: tuple[Asset, ...] = (
    Asset("https://code.jquery.com/jquery-3.3.1.min.js", "jquery", "dist/jquery.min.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js", "flot", "jquery.flot.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js", "flot", "jquery.flot.time.js"),
    Asset(
        "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js",
        "flot",
        "jquery.flot.selection.js",
    ),
    Asset(
        "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js",
        "flot",
        "jquery.flot.categories.js",
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js",
        "flot-orderbars",
        "js/jquery.flot.orderBars.js",
    ),
    Asset(
        "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js",
        "stupid-table-plugin",
        "stupidtable.min.js",
    ),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js", "blueimp-md5", "js/md5.min.js"),
    Asset(
        "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js", "bootstrap", "dist/js/bootstrap.min.js"
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css",
        "bootstrap",
        "dist/css/bootstrap.min.css",
    ),
)

# Extra files needed by the assets above (bootstrap.min.css uses ../fonts/*).
EXTRA_FILES: tuple[tuple[str, str], ...] = tuple(
    ("bootstrap", f"dist/fonts/glyphicons-halflings-regular.{ext}") for ext in ("eot", "svg", "ttf", "woff")
)

TAG_RE = re.compile(r"<(script|link)\b[^>]*>", re.IGNORECASE)
URL_ATTR_RE = re.compile(r"""\b(src|href)\s*=\s*(["'])(.*?)\2""", re.IGNORECASE | re.DOTALL)
REL_RE = re.compile(r"""\brel\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)
SRI_ATTR_RE = re.compile(
    r"""\s+(integrity|crossorigin|referrerpolicy)(\s*=\s*(["']).*?\3)?(?=[\s/>])""",
    re.IGNORECASE | re.DOTALL,
)
EXTERNAL_RE = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
JS_EXTERNAL_RE = re.compile(
    r"""(?:https?:)?//[^\s"'`)]+\.(?:js|mjs|css|woff2?|ttf|eot)(?:[?#][^\s"'`)]*)?(?=["'`)])""",
    re.IGNORECASE,
)
CSS_EXTERNAL_RE = re.compile(r"""(?:url\(|@import)\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)
# <link rel=...> values that do not make the browser fetch anything.
NON_LOADING_RELS = {"alternate", "canonical", "author", "license", "help", "next", "prev"}


class OfflineError(Exception):
    """A failure reported to the user as a single line."""


def vendor_dest(asset_package: str, asset_path: str) -> str:
    """Return the site-relative (posix) path for a vendored file."""
    return f"{VENDOR_SUBDIR}/{asset_package}/{asset_path}"


def needed_files(node_modules: Path) -> list[tuple[str, str]]:
    """(package, path) of every file to vendor, including LICENSE files."""
    files = {(a.package, a.path) for a in ASSETS} | set(EXTRA_FILES)
    for package in {p for p, _ in files}:
        for lic in (node_modules / package).glob("LICEN[CS]E*"):
            files.add((package, lic.name))
    return sorted(files)


def npm_error_summary(stderr: str) -> str:
    """Condense npm's multi-line error output to one short phrase."""
    lines = [ln.removeprefix("npm error").strip() for ln in stderr.splitlines()]
    keep = [
        ln
        for ln in lines
        if ln and not ln.startswith(("at ", "syscall", "errno", "A complete log", "}", "code:", "errno:"))
    ]
    return "; ".join(keep[:2]) or "no output"


def ensure_node_modules(vendor_dir: Path) -> Path:
    """Run npm ci/install in vendor_dir unless all needed files exist; return node_modules."""
    node_modules = vendor_dir / "node_modules"
    if not (vendor_dir / "package.json").is_file():
        raise OfflineError(f"{vendor_dir}/package.json not found; pass --vendor-dir pointing at tools/asv_offline")
    if all((node_modules / p / f).is_file() for p, f in needed_files(node_modules)):
        return node_modules
    npm = shutil.which("npm")
    if npm is None:
        raise OfflineError(
            f"npm not found on PATH; install Node.js/npm, or run 'npm ci' in {vendor_dir} on a connected machine and copy node_modules/ over"
        )
    verb = "ci" if (vendor_dir / "package-lock.json").is_file() else "install"
    cmd = [npm, verb, "--ignore-scripts", "--no-audit", "--no-fund"]
    print(f"asv_offline: running 'npm {' '.join(cmd[1:])}' in {vendor_dir}", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, check=False, cwd=vendor_dir, capture_output=True, text=True)
    if proc.returncode != 0:
        raise OfflineError(
            f"'npm {verb}' failed in {vendor_dir} (exit {proc.returncode}: {npm_error_summary(proc.stderr)}); "
            f"fix npm registry access or pre-populate {node_modules}"
        )
    return node_modules


def copy_vendor_files(node_modules: Path, html_dir: Path) -> None:
    """Copy every needed file (and each package's LICENSE) into HTML_DIR/vendor."""
    for package, rel in needed_files(node_modules):
        src = node_modules / package / rel
        if not src.is_file():
            raise OfflineError(
                f"{src} missing after npm; delete {node_modules} and run 'npm ci' in {node_modules.parent}"
            )
        dst = html_dir / vendor_dest(package, rel)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def site_files(html_dir: Path, suffix: str) -> list[Path]:
    """All files with ``suffix`` under html_dir, excluding the vendor dir."""
    vendor = html_dir / VENDOR_SUBDIR
    return sorted(p for p in html_dir.rglob(f"*{suffix}") if p.is_file() and vendor not in p.parents)


def relative_prefix(html_dir: Path, file: Path) -> str:
    """Prefix that leads from ``file``'s directory back to html_dir ('' or '../..')."""
    rel = os.path.relpath(html_dir, file.parent).replace(os.sep, "/")
    return "" if rel == "." else rel + "/"


def rewrite_html(text: str, prefix: str) -> str:
    """Point known CDN URLs in <script>/<link> tags at the vendor copies."""
    url_map = {a.url: prefix + vendor_dest(a.package, a.path) for a in ASSETS}

    def fix_tag(match: re.Match[str]) -> str:
        tag = match.group(0)
        attr = URL_ATTR_RE.search(tag)
        if attr is None or attr.group(3).strip() not in url_map:
            return tag
        local = url_map[attr.group(3).strip()]
        tag = tag[: attr.start(3)] + local + tag[attr.end(3) :]
        return SRI_ATTR_RE.sub("", tag)

    return TAG_RE.sub(fix_tag, text)


def rewrite_js(text: str, prefix: str) -> str:
    """Replace known CDN URLs appearing literally in JavaScript source."""
    for a in ASSETS:
        text = text.replace(a.url, prefix + vendor_dest(a.package, a.path))
    return text


def find_external(html_dir: Path) -> list[str]:
    """Return 'file: url' for every external resource URL still referenced."""
    problems: list[str] = []
    for file in site_files(html_dir, ".html"):
        for tag in TAG_RE.finditer(file.read_text(encoding="utf-8")):
            attr = URL_ATTR_RE.search(tag.group(0))
            if attr is None or not EXTERNAL_RE.match(attr.group(3)):
                continue
            if tag.group(1).lower() == "link":
                rel = REL_RE.search(tag.group(0))
                rels = set(rel.group(2).lower().split()) if rel else set()
                if rels and rels <= NON_LOADING_RELS:
                    continue
            problems.append(f"{file.relative_to(html_dir)}: {attr.group(3)}")
    for file in site_files(html_dir, ".js"):
        problems += [
            f"{file.relative_to(html_dir)}: {m.group(0)}"
            for m in JS_EXTERNAL_RE.finditer(file.read_text(encoding="utf-8"))
        ]
    for file in site_files(html_dir, ".css"):
        if CSS_EXTERNAL_RE.search(file.read_text(encoding="utf-8")):
            problems.append(f"{file.relative_to(html_dir)}: external url()/@import")
    return problems


def make_offline(html_dir: Path, vendor_dir: Path) -> int:
    """Vendor assets into html_dir and rewrite references; return #files changed."""
    copy_vendor_files(ensure_node_modules(vendor_dir), html_dir)
    changed = 0
    for suffix, rewrite in ((".html", rewrite_html), (".js", rewrite_js)):
        for file in site_files(html_dir, suffix):
            old = file.read_text(encoding="utf-8")
            new = rewrite(old, relative_prefix(html_dir, file))
            if new != old:
                file.write_text(new, encoding="utf-8")
                changed += 1
    return changed


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "html_dir", type=Path, metavar="HTML_DIR", help="output of 'asv publish' (asv.conf.json html_dir)"
    )
    parser.add_argument(
        "--vendor-dir",
        type=Path,
        default=DEFAULT_VENDOR_DIR,
        metavar="DIR",
        help="npm project holding package.json/package-lock.json/node_modules (default: %(default)s)",
    )
    parser.add_argument("--check", action="store_true", help="only verify that no external script/link URLs remain")
    args = parser.parse_args(argv)
    html_dir: Path = args.html_dir.resolve()
    try:
        if not (html_dir / "index.html").is_file():
            raise OfflineError(f"{html_dir}/index.html not found; run 'asv publish' first")
        changed = 0 if args.check else make_offline(html_dir, args.vendor_dir.resolve())
        problems = find_external(html_dir)
        if problems:
            raise OfflineError(
                f"{len(problems)} external URL(s) remain ({'; '.join(problems)}); "
                + (
                    "run tools/asv_offline.py without --check"
                    if args.check
                    else "add them to ASSETS in tools/asv_offline.py and package.json"
                )
            )
    except OfflineError as exc:
        print(f"asv_offline: error: {exc}", file=sys.stderr)
        return 1
    print(f"asv_offline: OK, {html_dir} is self-contained" + ("" if args.check else f" ({changed} file(s) rewritten)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
