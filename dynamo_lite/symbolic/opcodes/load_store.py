"""Loads and stores: fast locals, constants, globals, attributes, closure cells, imports."""
from __future__ import annotations

import builtins
import sys
import types

from ... import graph_breaks as gb
from ... import bytecode_compat
from ...exc import GraphBreak
from ...variables.base import NullVariable, runs_code_when_freed
from ...variables.constant import ConstantVariable, is_constant_value
from ...variables.builder import wrap
from ...variables.folding import wrap_constant_result
from . import register


def _load_fast(tx, name: str) -> None:
    if name in tx.cells:
        if bytecode_compat.LOAD_FAST_OF_CELL_IS_CLOSURE:  # (3.13) the cell object, for a closure
            tx.push(tx.cells[name])
        else:  # an argument that is also a cell (before MAKE_CELL ran)
            tx.push(tx.cell_load(name))
        return
    tx.read_argument(name)
    var = tx.symbolic_locals.get(name)
    if var is None:
        raise GraphBreak(gb.UNBOUND_NAME, f"local variable {name!r} referenced before assignment")
    tx.push(var)


@register("LOAD_FAST", "LOAD_FAST_CHECK")
def LOAD_FAST(tx, inst):
    _load_fast(tx, inst.argval)


@register("LOAD_FAST_LOAD_FAST")
def LOAD_FAST_LOAD_FAST(tx, inst):
    # (3.13) two LOAD_FASTs in one instruction
    first, second = inst.argval
    _load_fast(tx, first)
    _load_fast(tx, second)


def drop_reference(tx, var, what: str, local: str = None) -> None:
    """The frame lets go of ``var`` (``local`` deleted or overwritten, a value popped).  If it is
    a real object whose freeing runs code (its type has ``__del__``: a user class's, a
    generator's close, a file's flush) and no frame of the trace holds it elsewhere, this may be
    its last reference: the graph breaks so that Python drops it, and that code runs where eager
    runs it, after what comes before and before what comes after (a trace would drop it when the
    generated code returns, after every replayed print)."""
    if var is None or not runs_code_when_freed(var):
        return
    frame = tx
    while frame is not None:
        if any(v is var for v in frame.stack) or \
                any(v is var for name, v in frame.symbolic_locals.items() if not (frame is tx and name == local)):
            return
        frame = frame.parent
    raise GraphBreak(gb.FINALIZER_DROPPED, f"{what} may free {var.describe()}, and freeing it runs code")


@register("LOAD_FAST_AND_CLEAR")
def LOAD_FAST_AND_CLEAR(tx, inst):
    # an inlined comprehension saves the local its variable shadows (NULL when unbound) and
    # unbinds it; the STORE_FAST after the comprehension puts it back
    name = inst.argval
    if name in tx.cells:
        raise GraphBreak(gb.UNSUPPORTED_BYTECODE, f"comprehension variable {name!r} is a closure cell")
    tx.read_argument(name)
    var = tx.symbolic_locals.pop(name, None)
    tx.push(NullVariable() if var is None else var)


def _store_fast(tx, name: str) -> None:
    tx.read_argument(name)  # (rebinding it may free it: drop_reference looks at it)
    old = tx.symbolic_locals.get(name)
    if old is not None and old is not tx.peek():
        drop_reference(tx, old, f"assigning {name!r}", name)
    value = tx.pop()
    if isinstance(value, NullVariable):  # restoring a local that was unbound (LOAD_FAST_AND_CLEAR)
        tx.symbolic_locals.pop(name, None)
    else:
        tx.symbolic_locals[name] = value


@register("STORE_FAST")
def STORE_FAST(tx, inst):
    _store_fast(tx, inst.argval)


@register("STORE_FAST_LOAD_FAST")
def STORE_FAST_LOAD_FAST(tx, inst):
    # (3.13) STORE_FAST of the first name, then LOAD_FAST of the second
    first, second = inst.argval
    _store_fast(tx, first)
    _load_fast(tx, second)


@register("STORE_FAST_STORE_FAST")
def STORE_FAST_STORE_FAST(tx, inst):
    # (3.13) TOS into the first name, the value below it into the second
    first, second = inst.argval
    _store_fast(tx, first)
    _store_fast(tx, second)


@register("DELETE_FAST")
def DELETE_FAST(tx, inst):
    tx.read_argument(inst.argval)
    if inst.argval not in tx.symbolic_locals:
        raise GraphBreak(gb.UNBOUND_NAME, f"local variable {inst.argval!r} referenced before assignment")
    drop_reference(tx, tx.symbolic_locals[inst.argval], f"del {inst.argval}", inst.argval)
    del tx.symbolic_locals[inst.argval]


@register("LOAD_CONST")
def LOAD_CONST(tx, inst):
    value = inst.argval
    if type(value) in (tuple, frozenset):
        tx.push(wrap_constant_result(value))
    elif is_constant_value(value) or isinstance(value, types.CodeType):
        tx.push(ConstantVariable(value))
    else:  # an object placed in co_consts by generated code (resume functions, loop bodies)
        tx.push(wrap(tx, value, None))


@register("LOAD_GLOBAL")
def LOAD_GLOBAL(tx, inst):
    value = tx.load_global(inst.argval)
    if bytecode_compat.load_global_pushes_null(inst):
        for v in bytecode_compat.with_null(value, NullVariable()):
            tx.push(v)
    else:
        tx.push(value)


@register("STORE_GLOBAL")
def STORE_GLOBAL(tx, inst):
    tx.store_global(inst.argval, tx.pop())


@register("LOAD_ATTR")
def LOAD_ATTR(tx, inst):
    obj = tx.pop()
    attr = obj.var_getattr(tx, inst.argval)
    if bytecode_compat.load_attr_is_method(inst):
        # modelled as NULL + bound attribute (see load_method)
        for v in bytecode_compat.with_null(attr, NullVariable()):
            tx.push(v)
    else:
        tx.push(attr)


@register(bytecode_compat.OP_LOAD_SUPER_ATTR)
def load_super_attr(tx, inst):
    # super().name: pops the global `super`, the class and self (what the compiler loaded for
    # the zero-argument form: the __class__ cell and the first argument), as a call of super
    # then an attribute load
    obj = tx.pop()
    cls = tx.pop()
    global_super = tx.pop()
    is_method, two_args = bytecode_compat.load_super_attr_form(inst)
    sup = global_super.call_function(tx, [cls, obj] if two_args else [], {})
    attr = sup.var_getattr(tx, inst.argval)
    if is_method:
        for v in bytecode_compat.with_null(attr, NullVariable()):
            tx.push(v)
    else:
        tx.push(attr)


@register(bytecode_compat.OP_LOAD_METHOD)
def load_method(tx, inst):
    # Modelled as NULL + bound attribute: the unbound-method form (function + self)
    # is an optimisation with the same meaning.
    obj = tx.pop()
    attr = obj.var_getattr(tx, inst.argval)
    tx.push(NullVariable())
    tx.push(attr)


@register("STORE_ATTR")
def STORE_ATTR(tx, inst):
    obj = tx.pop()
    value = tx.pop()
    obj.setattr(tx, inst.argval, value)


@register("DELETE_ATTR")
def DELETE_ATTR(tx, inst):
    # del obj.name: what delattr(obj, "name") does (objects made in the trace; else a break)
    obj = tx.pop()
    wrap(tx, builtins.delattr, None).call_function(tx, [obj, ConstantVariable(inst.argval)], {})


@register("LOAD_DEREF")
def LOAD_DEREF(tx, inst):
    tx.push(tx.cell_load(inst.argval))


@register("STORE_DEREF")
def STORE_DEREF(tx, inst):
    tx.cell_store(inst.argval, tx.pop())


@register(bytecode_compat.OP_LOAD_CLOSURE)
def LOAD_CLOSURE(tx, inst):
    tx.push(tx.cells[inst.argval])


@register("MAKE_CELL", "COPY_FREE_VARS")
def MAKE_CELL(tx, inst):
    pass  # cells were created when the translator was set up


@register("IMPORT_NAME")
def IMPORT_NAME(tx, inst):
    fromlist = tx.pop()
    level = tx.pop()
    name = inst.argval
    if level.as_python_constant() != 0:
        name = _resolve_relative_import(tx, name, level.as_python_constant())
    module = sys.modules.get(name)
    if module is None:
        raise GraphBreak(gb.IMPORT, f"import of {name!r}, which is not imported yet (imports run module code)")
    names = fromlist.as_python_constant()
    if not names and "." in name:
        module = sys.modules.get(name.split(".")[0])
    for attr in names or ():
        # `from pkg import sub` imports pkg.sub when pkg has no attribute sub: that runs module code
        if attr != "*" and not hasattr(module, attr) and f"{name}.{attr}" not in sys.modules:
            raise GraphBreak(gb.IMPORT, f"import of {name}.{attr}, which is not imported yet (imports run module code)")
    tx.push(wrap(tx, module, None))


def _resolve_relative_import(tx, name: str, level: int) -> str:
    """The absolute name of ``from <level dots><name> import ...`` in the frame's module, as
    importlib resolves it from ``__package__``; anything unusual breaks (Python may warn or raise)."""
    package = tx.f_globals.get("__package__")
    spec = tx.f_globals.get("__spec__")
    if not isinstance(package, str) or not package or (spec is not None and getattr(spec, "parent", None) != package):
        raise GraphBreak(gb.IMPORT, "relative import in a module without a consistent __package__ / __spec__")
    bits = package.rsplit(".", level - 1)
    if len(bits) < level:
        raise GraphBreak(gb.IMPORT, "relative import beyond the top-level package (ImportError)")
    return f"{bits[0]}.{name}" if name else bits[0]


@register("IMPORT_FROM")
def IMPORT_FROM(tx, inst):
    module = tx.peek()
    value = module.as_python_constant() if module.is_python_constant() else None
    name = inst.argval
    if value is not None and not hasattr(value, name) and isinstance(getattr(value, "__name__", None), str):
        # like Python: a submodule imported but not (yet) an attribute of its package
        submodule = sys.modules.get(f"{value.__name__}.{name}")
        if submodule is not None:
            tx.push(wrap(tx, submodule, None))
            return
    tx.push(module.var_getattr(tx, name))
