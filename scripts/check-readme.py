#!/usr/bin/env python3
"""The README stays a short user's guide, and docs/README.md indexes every page in docs/.

  - README.md is under 350 lines: result tables, measurements and long explanations go to docs/
    and the README links them (it grew back to 615 lines once; issue 31).
  - It opens with exactly the two set-up commands: scripts/demo.sh (the main job on a built-in
    default, no cluster needed) and scripts/test.sh (the whole test suite).
  - It keeps the pod contract's annotation table (## The pod contract) and links docs/README.md.
  - docs/README.md has exactly one index line per page in docs/ (a table row or list item whose
    first link is the page), and no line for a page that does not exist.

Usage: scripts/check-readme.py [--self-test]
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 350  # the README must be shorter than this
SETUP_COMMANDS = ["scripts/demo.sh", "scripts/test.sh"]
INDEX_LINE = re.compile(r"^\s*(?:\|\s*|[-*]\s+)\[[^\]]*\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def check_readme(text):
    problems = []
    lines = text.splitlines()
    if len(lines) >= MAX_LINES:
        problems.append(f"README.md has {len(lines)} lines; keep it under {MAX_LINES}: move result tables, "
                        "measurements and long explanations to a page in docs/ and link it")
    m = re.search(r"```(?:sh|bash)\n(.*?)```", text, re.S)
    first_heading = text.find("\n## ")
    if not m or (first_heading >= 0 and m.start() > first_heading):
        problems.append("README.md: the set-up commands (a ```sh block before the first ## section) are missing")
    else:
        commands = [line.split("#", 1)[0].strip() for line in m.group(1).splitlines()]
        commands = [c for c in commands if c]
        if commands != SETUP_COMMANDS:
            problems.append(f"README.md: the set-up block must hold exactly {SETUP_COMMANDS}, has {commands}")
    section = re.search(r"^## The pod contract\n(.*?)(?=^## )", text, re.S | re.M)
    if not section or not re.search(r"^\|.*troupe\.dev/gpu-model", section.group(1), re.M):
        problems.append("README.md: the pod contract's annotation table (## The pod contract) is missing")
    if "(docs/README.md)" not in text:
        problems.append("README.md: link the documentation index, docs/README.md")
    return problems


def check_index(index_text, pages):
    problems = []
    seen = {}
    for line in index_text.splitlines():
        m = INDEX_LINE.match(line)
        if m:
            seen[m.group(1)] = seen.get(m.group(1), 0) + 1
    for page in sorted(pages):
        if page not in seen:
            problems.append(f"docs/README.md: no index line for {page}; add one line saying what it covers")
        elif seen[page] > 1:
            problems.append(f"docs/README.md: {page} is indexed {seen[page]} times; keep one line")
    for page in sorted(set(seen) - set(pages)):
        if "/" not in page:
            problems.append(f"docs/README.md: indexes {page}, which is not in docs/")
    return problems


def self_test():
    good = ("# T\n\n```sh\nscripts/demo.sh    # one\nscripts/test.sh    # two\n```\n\n[docs](docs/README.md)\n"
            "## The pod contract\n\n| what | how |\n|---|---|\n| models | `troupe.dev/gpu-model` |\n\n## Next\n")
    assert check_readme(good) == [], check_readme(good)
    assert check_readme(good.replace("scripts/test.sh    # two\n", ""))
    assert check_readme(good.replace("`troupe.dev/gpu-model`", "models"))
    assert check_readme(good + "x\n" * MAX_LINES)
    index = "| page | what |\n|---|---|\n| [a.md](a.md) | A |\n- [b.md](b.md#x): B\n[c.md](c.md) in prose\n"
    assert check_index(index, ["a.md", "b.md"]) == [], check_index(index, ["a.md", "b.md"])
    assert check_index(index, ["a.md", "b.md", "c.md"])  # prose mentions are not index lines
    assert check_index(index + "| [a.md](a.md) | again |\n", ["a.md", "b.md"])
    assert check_index(index, ["a.md"])  # b.md is gone
    print("check-readme: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    with open(os.path.join(ROOT, "docs", "README.md"), encoding="utf-8") as f:
        index = f.read()
    pages = [os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))
             if os.path.basename(p) != "README.md"]
    problems = check_readme(readme) + check_index(index, pages)
    for p in problems:
        print(f"check-readme: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check-readme: README.md has {len(readme.splitlines())} lines (limit {MAX_LINES - 1}); "
          f"docs/README.md indexes all {len(pages)} pages")


if __name__ == "__main__":
    main()
