#!/usr/bin/env python3
"""No function in src/ or include/ is longer than 120 lines (signature to closing brace).

A long function is where a newcomer gets lost and where the next feature lands as one more
branch; split it into named steps instead. The scan is a brace matcher, not a C++ parser:
comments, string and character literals (raw strings too) and preprocessor lines are blanked
first, then every `{` at namespace or class scope is classified by the text before it (a
function body, a constructor's member initialiser, a namespace, a class, or an initialiser).
Lambdas and blocks inside a function count toward that function; a lambda at namespace scope
counts as a function of its own.

Files listed in scripts/function-length-allow.txt (one `path` or `path:function` a line, `#`
comments) may still be over the limit: they are being split on another branch. An entry that no
longer matches a long function is reported, so the list only shrinks.

Usage: scripts/check-function-length.py [--max N] [--list] [--self-test] [FILE ...]
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 120
ALLOW_FILE = os.path.join(ROOT, "scripts", "function-length-allow.txt")

# What may follow a function's parameter list before its body.
AFTER_PARAMS = re.compile(
    r"^(\s*(const|volatile|noexcept|override|final|mutable|constexpr|try|&&|&|->[^;{}]*))*\s*$")
IDENT_TAIL = re.compile(r"[\w>\]]\s*$")


def blank(text):
    """The text with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) \
                or (c in "uUL8" and re.match(r'(u8|u|U|L)R"', text[i:i + 4])
                    and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            m = re.match(r'(u8|u|U|L)?R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(2) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(2)) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:end]))
            i = end
        elif c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def top_level(prefix):
    """The prefix with everything inside (), [] and <...> of templates left out."""
    depth, out = 0, []
    for ch in prefix:
        if ch in "([":
            if depth == 0:
                out.append(ch)
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
            if depth == 0:
                out.append(ch)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def is_ctor_init(prefix):
    """A `)` followed by a single `:` at paren depth 0: a constructor's member initialisers."""
    flat = top_level(prefix)
    close = flat.find(")")
    return close >= 0 and re.search(r"(?<!:):(?!:)", flat[close:]) is not None


def is_function(prefix):
    flat = top_level(prefix)
    if re.search(r"\b(namespace|class|struct|union|enum)\b", flat) and ")" not in flat:
        return False
    close = flat.rfind(")")
    return close >= 0 and AFTER_PARAMS.match(flat[close + 1:]) is not None


def function_name(prefix):
    flat = re.sub(r"\b(public|private|protected)\s*:", " ", prefix)
    flat = re.sub(r"\s+", " ", flat).strip()
    m = re.search(r"([\w:~]+(?:operator\s*(?:\(\)|[^\s(]+))?)\s*\(", flat)
    if m and "[" in flat[:m.start() + 1] and re.search(r"(\w+)\s*=\s*\[", flat):
        return re.search(r"(\w+)\s*=\s*\[", flat).group(1) + " (lambda)"
    return m.group(1) if m else flat[:60]


def functions(text):
    """Yield (name, first line, last line) of every function body in one file's text."""
    code = blank(text)
    line_of = []
    line = 1
    for ch in code:
        line_of.append(line)
        if ch == "\n":
            line += 1
    # Scope stack at namespace/class level: ("ns" | "class" | "other", prefix saved).
    stack = []
    prefix_start = 0  # index where the current declaration's text begins
    i, n = 0, len(code)
    paren = 0
    while i < n:
        c = code[i]
        inside_other = any(kind == "other" for kind in stack)
        if c in "([":
            paren += 1
        elif c in ")]":
            paren = max(0, paren - 1)
        elif c == ";" and paren == 0:
            prefix_start = i + 1
        elif c == "}" and paren == 0:
            if stack:
                stack.pop()
            prefix_start = i + 1
        elif c == "{" and paren == 0:
            prefix = code[prefix_start:i]
            if inside_other:
                stack.append(("other", None))
                prefix_start = i + 1
            elif is_ctor_init(prefix) and IDENT_TAIL.search(prefix) and not prefix.rstrip().endswith(")"):
                # A member initialiser with braces (a_{x}): skip it, the body comes later.
                i = skip_block(code, i)
                continue
            elif is_function(prefix) or (is_ctor_init(prefix) and prefix.rstrip().endswith(("}", ")"))):
                end = skip_block(code, i)
                start = prefix_start + (len(prefix) - len(prefix.lstrip()))
                # Access specifiers (public:) before a member are not part of it.
                m = re.match(r"\s*((public|private|protected)\s*:\s*)+", code[start:i])
                if m:
                    start += m.end()
                    start += len(code[start:i]) - len(code[start:i].lstrip())
                yield function_name(prefix), line_of[start], line_of[min(end - 1, n - 1)]
                i = end
                prefix_start = i
                continue
            elif re.search(r"\bnamespace\b|\bextern\b", prefix) and "=" not in prefix:
                stack.append(("ns", None))
                prefix_start = i + 1
            elif re.search(r"\b(class|struct|union)\b", top_level(prefix)) and "=" not in prefix:
                stack.append(("class", None))
                prefix_start = i + 1
            else:
                stack.append(("other", None))
                prefix_start = i + 1
        i += 1


def skip_block(code, i):
    """The index just after the `}` that closes the `{` at i."""
    depth = 0
    n = len(code)
    while i < n:
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def source_files():
    for base in ("src", "include"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, base)):
            for name in sorted(names):
                if name.endswith((".cc", ".h")):
                    yield os.path.join(dirpath, name)


def read_allow():
    entries = []
    if os.path.exists(ALLOW_FILE):
        with open(ALLOW_FILE, encoding="utf-8") as f:
            for raw in f:
                entry = raw.split("#", 1)[0].strip()
                if entry:
                    entries.append(entry)
    return entries


def self_test():
    sample = '''
#include <string>
#define LONG(x) \\
  { x; }
namespace a {
namespace {
constexpr int kX{3};
const char* s = "{ not a brace";
const char* r = R"x({ raw } })x";
char q = '{';
}  // namespace
struct S : Base {
  int v_{0};
  std::function<void(int)> f_{nullptr};
 public:
  S() : Base{1}, v_(2) { v_ = 3; }
  int get() const noexcept { return v_; }
  auto trail() -> std::vector<int> {
    auto l = [&](int z) { return z; };  // }
    return {};
  }
};
enum class E : int { kA, kB };
int free(int x) {
  if (x) {
    return 1'000;
  }
  return 0;
}
}  // namespace a
'''
    got = [(name, first, last) for name, first, last in functions(sample)]
    want = [("S", 16, 16), ("get", 17, 17), ("trail", 18, 21), ("free", 24, 29)]
    if got != want:
        print(f"check-function-length: self-test failed:\n  got  {got}\n  want {want}", file=sys.stderr)
        sys.exit(1)
    print("check-function-length: self-test passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=MAX_LINES)
    parser.add_argument("--list", action="store_true", help="print every function over the limit, allowed or not")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return
    allow = read_allow()
    used = set()
    problems, allowed, count = [], [], 0
    for path in [os.path.abspath(f) for f in args.files] or source_files():
        rel = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for name, first, last in functions(text):
            count += 1
            length = last - first + 1
            if length <= args.max:
                continue
            where = f"{rel}:{first}-{last}: {name} is {length} lines (limit {args.max})"
            hit = next((e for e in allow if e in (rel, f"{rel}:{name}")), None)
            if hit:
                used.add(hit)
                allowed.append(where)
            else:
                problems.append(where)
    if args.list:
        for a in allowed:
            print(f"check-function-length: allowed: {a}")
    stale = [e for e in allow if e not in used] if not args.files else []
    for p in problems:
        print(f"check-function-length: {p}; split it into named steps", file=sys.stderr)
    for s in stale:
        print(f"check-function-length: {os.path.relpath(ALLOW_FILE, ROOT)}: {s!r} has no function "
              f"over {args.max} lines any more; remove the entry", file=sys.stderr)
    if problems or stale:
        sys.exit(1)
    print(f"check-function-length: {count} functions, none over {args.max} lines"
          + (f" ({len(allowed)} allowed in {os.path.relpath(ALLOW_FILE, ROOT)})" if allowed else ""))


if __name__ == "__main__":
    main()
