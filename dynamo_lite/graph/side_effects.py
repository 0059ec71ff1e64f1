"""Side effects: mutations the trace made to the world outside the graph.

The graph holds only tensor work.  Everything else the frame did to objects
that outlive it (list/dict/set contents, object and module attributes,
globals, closure cells) is logged here during tracing and replayed by
generated code after the graph runs, in the order it happened, so that
compiled and eager runs leave the world in the same state.
Objects created during the trace are rebuilt only if they escape.
Tested by tests/semantics/test_side_effects.py.
"""
from __future__ import annotations

from typing import Optional

from ..exc import InternalError
from ..variables.base import VariableTracker
from ..variables.mappings import DictVariable
from ..variables.sequences import DequeVariable, ListVariable
from ..variables.sets import SetVariable


class SideEffects:
    """The mutation log of one trace (shared by the root and inlined frames).

    Attributes:
        attr_values: id(obj tracker) -> {attr name: value tracker}, the current
            value of every attribute written during the trace.
        attr_objects: id(obj tracker) -> obj tracker, in first-write order.
        mutated: id(container tracker) -> tracker, for containers with a source
            whose contents changed.
        global_stores: global name -> value tracker.
        cell_stores: id(cell tracker) -> (cell tracker, value tracker), for
            cells outside the trace (the frame's free variables, real cells).
        new_objects: objects created during the trace, in creation order.
    """

    def __init__(self):
        self.attr_values: dict[int, dict[str, VariableTracker]] = {}
        self.attr_objects: dict[int, VariableTracker] = {}
        self.mutated: dict[int, VariableTracker] = {}
        self.global_stores: dict[str, VariableTracker] = {}
        self.cell_stores: dict[int, tuple] = {}
        self.new_objects: list[VariableTracker] = []
        self.order: list[tuple[str, int]] = []  # ("attr"|"container"|"global"|"cell", key)
        self._noted: set = set()
        # bumped by every mutation, of traced-only objects too (generator inlining checks it)
        self.version = 0

    def is_empty(self) -> bool:
        return not (self.attr_objects or self.mutated or self.global_stores or self.cell_stores)

    def _note(self, kind: str, key) -> None:
        entry = (kind, key)
        if entry not in self._noted:
            self._noted.add(entry)
            self.order.append(entry)

    # ---- recording ----------------------------------------------------------
    def mutate(self, var: VariableTracker) -> None:
        self.version += 1
        if var.source is not None:
            self.mutated[id(var)] = var
            self._note("container", id(var))

    def store_attr(self, obj: VariableTracker, name: str, value: VariableTracker) -> None:
        self.version += 1
        self.attr_objects.setdefault(id(obj), obj)
        self.attr_values.setdefault(id(obj), {})[name] = value
        if obj.source is not None:
            self._note("attr", id(obj))

    def load_attr(self, obj: VariableTracker, name: str) -> Optional[VariableTracker]:
        return self.attr_values.get(id(obj), {}).get(name)

    def delete_new_object_attr(self, obj: VariableTracker, name: str) -> bool:
        """``del obj.name`` of an object made in the trace (nothing to replay: it is rebuilt
        without the attribute); False when it has no such attribute."""
        attrs = self.attr_values.get(id(obj), {})
        if name not in attrs:
            return False
        self.version += 1
        del attrs[name]
        return True

    def new_object_attrs(self, obj: VariableTracker) -> dict[str, VariableTracker]:
        return self.attr_values.get(id(obj), {})

    def track_new_object(self, obj: VariableTracker) -> None:
        self.new_objects.append(obj)

    def store_global(self, name: str, value: VariableTracker) -> None:
        self.version += 1
        self.global_stores[name] = value
        self._note("global", name)

    def load_global(self, name: str) -> Optional[VariableTracker]:
        return self.global_stores.get(name)

    def store_cell(self, cell, value: VariableTracker) -> None:
        self.version += 1
        self.cell_stores[id(cell)] = (cell, value)
        self._note("cell", id(cell))

    def describe(self) -> list[str]:
        out = []
        for kind, key in self.order:
            if kind == "container":
                out.append(f"mutate {self.mutated[key].source.name()}")
            elif kind == "attr":
                obj = self.attr_objects[key]
                for name in self.attr_values[key]:
                    out.append(f"setattr {obj.source.name()}.{name}")
            elif kind == "global":
                out.append(f"global {key}")
            else:
                out.append(f"cell {self.cell_stores[key][0].name}")
        return out

    # ---- replay -------------------------------------------------------------
    def codegen(self, cg) -> None:
        """Emit code that applies every logged effect to the real objects."""
        for kind, key in self.order:
            if kind == "container":
                var = self.mutated[key]
                # the targets are rebuilt through cg.reconstruct, which uses the value
                # preloaded before the replay when an earlier effect may overwrite the source
                if isinstance(var, ListVariable):
                    cg.reconstruct_contents(var)
                    cg.reconstruct(var)
                    cg.load_const(None)
                    cg.load_const(None)
                    cg.emit("BUILD_SLICE", 2)
                    cg.emit("STORE_SUBSCR")
                elif isinstance(var, DequeVariable):  # d.clear(); d.extend([...]) (maxlen is the deque's own)
                    cg.reconstruct(var)
                    cg.load_method("clear")
                    cg.call_method(0)
                    cg.emit("POP_TOP")
                    cg.reconstruct(var)
                    cg.load_method("extend")
                    for item in var.items:
                        cg.reconstruct(item)
                    cg.emit("BUILD_LIST", len(var.items))
                    cg.call_method(1)
                    cg.emit("POP_TOP")
                elif isinstance(var, (DictVariable, SetVariable)):
                    cg.reconstruct_contents(var)
                    tmp = cg.new_temp()
                    cg.store_fast(tmp)
                    cg.reconstruct(var)
                    cg.load_method("clear")
                    cg.call_method(0)
                    cg.emit("POP_TOP")
                    cg.reconstruct(var)
                    cg.load_method("update")
                    cg.load_fast(tmp)
                    cg.call_method(1)
                    cg.emit("POP_TOP")
                else:
                    raise InternalError(f"the side-effect log holds a mutated {var.describe()}, which it cannot replay")
            elif kind == "attr":
                obj = self.attr_objects[key]
                for name, value in self.attr_values[key].items():
                    cg.reconstruct(value)
                    cg.reconstruct(obj)
                    cg.emit("STORE_ATTR", name)
            elif kind == "global":
                cg.reconstruct(self.global_stores[key])
                cg.emit("STORE_GLOBAL", key)
            else:
                cell, value = self.cell_stores[key]
                cg.reconstruct(value)
                if cell.kind == "root":
                    cg.store_deref(cell.name)
                else:
                    cell.source.reconstruct(cg)
                    cg.emit("STORE_ATTR", "cell_contents")

    def values_to_reconstruct(self) -> list[VariableTracker]:
        """Every tracker the replay will rebuild (for collecting graph outputs)."""
        out = []
        for kind, key in self.order:
            if kind == "container":
                var = self.mutated[key]
                out.extend(var.items.values() if isinstance(var.items, dict) else var.items)
            elif kind == "attr":
                out.extend(self.attr_values[key].values())
            elif kind == "global":
                out.append(self.global_stores[key])
            else:
                out.append(self.cell_stores[key][1])
        return out
