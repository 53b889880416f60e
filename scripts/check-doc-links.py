#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md resolves: the file exists and, for a link with
#anchor into a Markdown file, the anchor is one of that file's headings (GitHub's slugs).

Links to http(s) and mailto are not checked. Usage: scripts/check-doc-links.py [FILE.md ...]
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Files another branch adds; a link to one is a warning while it is absent. Remove an entry once
# its file is on main.
PENDING = {"docs/extending.md": "written with the policy plugins"}

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else f"{s}-{n}")
    return out


def links(path):
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                yield number, m.group(1) or m.group(2)


def main():
    files = sys.argv[1:] or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    problems, warnings, checked = [], [], 0
    for path in files:
        rel_path = os.path.relpath(path, ROOT)
        for number, target in links(path):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            checked += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            dest_rel = os.path.relpath(dest, ROOT)
            where = f"{rel_path}:{number}: link {target!r}"
            if not os.path.exists(dest):
                if dest_rel in PENDING:
                    warnings.append(f"{where}: {dest_rel} does not exist yet ({PENDING[dest_rel]})")
                else:
                    problems.append(f"{where}: no file {dest_rel}; fix the path or add the file")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{where}: {dest_rel} has no heading with anchor #{anchor}; "
                                f"link one of: {', '.join(sorted(anchors(dest)))}")
    for w in warnings:
        print(f"check-doc-links: warning: {w}")
    for p in problems:
        print(f"check-doc-links: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check-doc-links: {checked} relative links in {len(files)} files resolve")


if __name__ == "__main__":
    main()
