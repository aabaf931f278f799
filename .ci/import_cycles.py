#!/usr/bin/env python3
"""Fails if the library's modules import each other in a circle.

Nodes are the modules of crates/nearkit/src (one per file); an edge a -> b means a's code
names an item of b (a `use`, a re-export, or a path in code). A parent's `mod child;`
declaration is not an edge. Prints every cycle found (as module paths) and exits 1.
"""
import pathlib
import re
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "crates" / "nearkit" / "src"


def module_of(path):
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


modules = {module_of(p): p for p in SRC.rglob("*.rs")}


def resolve(current, path):
    """The module a path like crate::a::b::Item or super::x::Y names, or None."""
    segs = path.split("::")
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] == "super":
        base = current
        while segs and segs[0] == "super":
            base, segs = base[:-1], segs[1:]
    elif segs[0] == "self":
        base, segs = current, segs[1:]
    else:
        base = current
        if (current + (segs[0],)) not in modules:
            return None
    best = None
    for i in range(len(segs) + 1):
        m = base + tuple(segs[:i])
        if m in modules:
            best = m
    return best


PATH = re.compile(r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+((?:crate|super|self)[A-Za-z0-9_:]*)::\{([^;]*)\};", re.S)

edges = {m: set() for m in modules}
for m, p in modules.items():
    text = re.sub(r"//[^\n]*", "", p.read_text())
    found = set()
    for g in USE_GROUP.finditer(text):
        prefix = g.group(1)
        for item in re.split(r",", g.group(2)):
            item = item.strip().split(" as ")[0].split("::{")[0].strip("{} \n")
            if item:
                found.add(prefix + "::" + item)
    found.update(PATH.findall(text))
    for path in found:
        target = resolve(m, path)
        if target is not None and target != m:
            edges[m].add(target)

cycles = []
state = {}
stack = []


def visit(m):
    state[m] = 1
    stack.append(m)
    for n in sorted(edges[m]):
        if state.get(n) == 1:
            cycles.append(stack[stack.index(n):] + [n])
        elif n not in state:
            visit(n)
    stack.pop()
    state[m] = 2


sys.setrecursionlimit(10000)
for m in sorted(modules):
    if m not in state:
        visit(m)

if cycles:
    for c in cycles:
        print("import cycle: " + " -> ".join("::".join(x) or "crate" for x in c))
    sys.exit(1)
print(f"no import cycles among {len(modules)} modules ({sum(len(e) for e in edges.values())} edges)")
