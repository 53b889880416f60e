#!/usr/bin/env python3
"""The pod contract stays in one header, and README.md's table says what it says.

include/troupe/model/pod_contract.h defines every label, annotation and resource key Troupe
reads or writes. This checks that:
  - each key string is defined there once (a second role of a key is an alias: kX = kY), and
    each constant has a meaning (a comment on its line or the line above);
  - README.md's table under "## The pod contract" lists exactly the keys of the header's section
    "What a pod asks for its GPUs" (the first `key` of each row's second column);
  - every key of the header appears in README.md or docs/;
  - no other header or source under include/ and src/ defines a constant for a key the header
    has (the keys scattered over five headers once).
A failure names the keys and the file to change. Run from anywhere:
scripts/check-pod-contract.py (--self-test checks the parsers on made-up text).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = "include/troupe/model/pod_contract.h"
TABLE_SECTION = "What a pod asks for its GPUs"
README_HEADING = "## The pod contract"

CONSTANT = re.compile(r'^\s*inline\s+constexpr\s+const\s+char\s*\*\s*(k\w+)\s*=\s*(?:"([^"]+)"|(k\w+))\s*;\s*(//.*)?$')
SECTION = re.compile(r"^//\s*---\s*(.+?)\s*---\s*$")
CODE = re.compile(r"`([^`]+)`")


def parse_header(text):
    """[(section, name, key, alias_of, has_meaning)] in order; key is None for an alias."""
    out = []
    section = ""
    previous = ""
    for line in text.splitlines():
        m = SECTION.match(line.strip())
        if m:
            section = m.group(1).split(" (")[0].strip()
            previous = ""
            continue
        m = CONSTANT.match(line)
        if m:
            name, key, alias, comment = m.groups()
            has_meaning = bool(comment) or previous.startswith("//")
            out.append((section, name, key, alias, has_meaning))
        previous = line.strip()
    return out


def resolve(constants):
    """name -> key string, aliases followed."""
    keys = {name: key for _, name, key, _, _ in constants if key}
    for _, name, _, alias, _ in constants:
        if alias:
            keys[name] = keys.get(alias)
    return keys


def readme_table_keys(text):
    """The first `code` of each row's second column in the table after README_HEADING."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == README_HEADING)
    except StopIteration:
        return None
    keys = []
    in_table = False
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and not set(cells[1]) <= set("-: "):
                m = CODE.search(cells[1])
                if m and in_table:
                    keys.append(m.group(1))
            in_table = True
        elif in_table:
            break
    return keys


def documented_text():
    parts = [open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()]
    docs = os.path.join(ROOT, "docs")
    for dirpath, _, names in os.walk(docs):
        for n in sorted(names):
            if n.endswith(".md"):
                parts.append(open(os.path.join(dirpath, n), encoding="utf-8").read())
    return "\n".join(parts)


def stray_definitions(keys):
    """(file, line, key) for a constant defined outside the header with one of `keys`."""
    found = []
    for base in ("include", "src"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, base)):
            for n in sorted(names):
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, ROOT)
                if not n.endswith((".h", ".cc")) or rel == HEADER:
                    continue
                with open(path, encoding="utf-8") as f:
                    for i, line in enumerate(f, 1):
                        m = CONSTANT.match(line)
                        if m and m.group(2) in keys:
                            found.append((rel, i, m.group(2)))
    return found


def check():
    problems = []
    constants = parse_header(open(os.path.join(ROOT, HEADER), encoding="utf-8").read())
    if not constants:
        return [f"{HEADER}: no key constants found"]
    keys = resolve(constants)
    seen = {}
    for _, name, key, _, has_meaning in constants:
        if not has_meaning:
            problems.append(f"{HEADER}: {name} has no meaning: add a comment on its line or the line above")
        if key:
            if key in seen:
                problems.append(f"{HEADER}: {key} is defined twice ({seen[key]}, {name}); make one an alias")
            seen[key] = name
    table_section = {keys[name] for section, name, _, _, _ in constants if section == TABLE_SECTION}
    if not table_section:
        problems.append(f'{HEADER}: no section "// --- {TABLE_SECTION} ... ---"')
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    table = readme_table_keys(readme)
    if table is None:
        problems.append(f'README.md: no "{README_HEADING}" heading with the table of the pod\'s keys')
    else:
        missing = sorted(table_section - set(table))
        extra = sorted(set(table) - table_section)
        if missing:
            problems.append(f"README.md's pod contract table lacks {', '.join(missing)} ({HEADER}: {TABLE_SECTION})")
        if extra:
            problems.append(f"README.md's pod contract table lists {', '.join(extra)}, which {HEADER}'s "
                            f'section "{TABLE_SECTION}" does not define')
    docs = documented_text()
    for key in sorted(set(keys.values())):
        if key not in docs:
            problems.append(f"{key} ({HEADER}) is in neither README.md nor docs/: say what it does")
    for rel, line, key in stray_definitions(set(keys.values())):
        problems.append(f"{rel}:{line}: defines {key} again; use the constant of {HEADER}")
    return problems


def self_test():
    header = """
// --- What a pod asks for its GPUs (README) ---
inline constexpr const char* kA = "x/a";  // a
// b's meaning
inline constexpr const char* kB = "x/b";
inline constexpr const char* kC = kA;
// --- Other ---
inline constexpr const char* kD = "x/d";
"""
    constants = parse_header(header)
    assert [(s, n) for s, n, *_ in constants] == [
        (TABLE_SECTION, "kA"), (TABLE_SECTION, "kB"), (TABLE_SECTION, "kC"), ("Other", "kD")], constants
    assert [m for *_, m in constants] == [True, True, False, False], constants
    assert resolve(constants)["kC"] == "x/a"
    readme = f"""# T
{README_HEADING}

| what | how | example |
|---|---|---|
| one | `x/a`: text `x/z` | `1` |
| two | `x/b` | `2` |

| other | `x/q` |
## Next
"""
    assert readme_table_keys(readme) == ["x/a", "x/b"], readme_table_keys(readme)
    assert readme_table_keys("# none\n") is None
    print("check-pod-contract: self-test passed")


def main():
    if "--self-test" in sys.argv[1:]:
        self_test()
        return 0
    problems = check()
    for p in problems:
        print(f"check-pod-contract: {p}", file=sys.stderr)
    if problems:
        return 1
    n = len(parse_header(open(os.path.join(ROOT, HEADER), encoding="utf-8").read()))
    print(f"check-pod-contract: {n} keys in {HEADER}, README's table matches, all documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
