"""The module-level cycle check import-linter has no contract for: no module of `bot` imports, directly or
through others, a module that imports it back (import-linter's `acyclic_siblings` checks packages and sibling
modules; a circle through modules of different packages would pass it). Imports under `TYPE_CHECKING` are left
out: they never run. Imports inside functions count: they run when called."""

from __future__ import annotations

import grimp


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_bot_is_part_of_an_import_circle():
    graph = grimp.build_graph("bot", exclude_type_checking_imports=True)
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_circle_through_modules_of_different_packages():
    graph = grimp.ImportGraph()
    for module in ("bot", "bot.a", "bot.a.x", "bot.b", "bot.b.y", "bot.c"):
        graph.add_module(module)
    graph.add_import(importer="bot.a.x", imported="bot.b.y")
    graph.add_import(importer="bot.b.y", imported="bot.a.x")
    graph.add_import(importer="bot.c", imported="bot.a.x")
    assert _cycles(graph) == [["bot.a.x", "bot.b.y"]]
