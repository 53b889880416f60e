#!/usr/bin/env python3
"""Render a ${VAR} template from the environment (stdlib only).

Rules: full-line comments are copied verbatim. Elsewhere ${NAME} is replaced by os.environ["NAME"]. A line that ends with the
comment "# optional" is dropped if any of its variables is unset or empty
(the marker itself is removed otherwise). Any other unset variable is an
error, so a typo in the template or a missing export fails loudly.

Usage: render_template.py TEMPLATE [OUTPUT]   (OUTPUT defaults to stdout)
"""
import os
import re
import sys

VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
OPTIONAL = re.compile(r"\s*#\s*optional\s*$")


def render(text, env):
    out, missing = [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):  # full-line comments are copied verbatim
            out.append(line)
            continue
        names = VAR.findall(line)
        optional = bool(OPTIONAL.search(line))
        if optional:
            line = OPTIONAL.sub("", line)
            if any(not env.get(n) for n in names):
                continue
        for n in names:
            if n not in env:
                missing.append(f"line {lineno}: ${{{n}}}")
        out.append(VAR.sub(lambda m: env.get(m.group(1), ""), line))
    if missing:
        raise SystemExit("render_template: unset variables: " + ", ".join(missing))
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) not in (2, 3):
        raise SystemExit(__doc__)
    with open(argv[1], encoding="utf-8") as f:
        result = render(f.read(), os.environ)
    if len(argv) == 3:
        tmp = argv[2] + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(result)
        os.replace(tmp, argv[2])
    else:
        sys.stdout.write(result)


if __name__ == "__main__":
    main(sys.argv)
