#!/usr/bin/env python3
"""Circles of imports between the modules of each crate (issue "one owner for
each idea": none inside a crate). Module `a` depends on module `b` when a's
file, tests left out, names `crate::b...` or `super::b`. Prints every
strongly connected component of two or more modules and exits 1 if there is
one. `cargo modules` draws the same graph; this needs only Python.

    scripts/module-circles.py crates/*/src src
"""
import os
import re
import sys
from collections import defaultdict


def modules(src):
    """Module path (`feed::in_vram`, '' for the crate root) -> file."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            # Test modules in files of their own (`foo/tests.rs`) are not part of the build.
            if f.endswith(".rs") and f != "tests.rs":
                path = os.path.join(root, f)
                parts = os.path.relpath(path, src)[:-3].split(os.sep)
                if parts[-1] in ("lib", "main", "mod"):
                    parts = parts[:-1]
                mods["::".join(parts)] = path
    return mods


def dependencies(mods):
    graph = defaultdict(set)
    for m, path in mods.items():
        text = open(path).read()
        cut = text.find("#[cfg(test)]\nmod tests")
        text = re.sub(r"//.*", "", text if cut < 0 else text[:cut])
        named = set()
        for use in re.finditer(r"\buse\s+crate::\{([^;]*)\};", text, re.S):
            named.update(item.strip().split("::")[0] for item in use.group(1).split(","))
        for ref in re.finditer(r"\bcrate::((?:\w+::)*\w+)", text):
            parts = ref.group(1).split("::")
            # The longest prefix that is a module.
            named.add(next(("::".join(parts[:k]) for k in range(len(parts), 0, -1) if "::".join(parts[:k]) in mods), ""))
        parent = m.split("::")[:-1] if m else []
        for ref in re.finditer(r"\bsuper::(\w+)", text):
            named.add("::".join(parent + [ref.group(1)]))
        for n in named:
            # A module's own children and parents are its parts, not a dependency.
            if n in mods and n and m and n != m and not n.startswith(m + "::") and not m.startswith(n + "::"):
                graph[m].add(n)
    return graph


def circles(nodes, graph):
    """Tarjan's strongly connected components of more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


found = 0
for src in sys.argv[1:] or ["src"]:
    mods = modules(src)
    for comp in circles(mods, dependencies(mods)):
        found += 1
        print(f"{src}: a circle of {len(comp)} modules: {', '.join(comp)}")
print(f"{found} circle(s)")
sys.exit(1 if found else 0)
