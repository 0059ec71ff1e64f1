"""Calls replayed after the graph: ``print``, ``logging.Logger`` methods (and transformers'
``warning_once``/``info_once``), ``warnings.warn``, ``Tensor.register_hook`` (see
``register_tensor_hook``: on an input tensor the call is replayed after the graph; on a tensor
computed in the graph it is a graph node) and ``Module.register_forward_hook``/
``register_forward_pre_hook`` on an input module (see ``_module_hook_handler``).

Their only effect is output (stdout, log records, warnings), so the trace does not stop at
them: it logs the call in the side-effect log (graph/side_effects.py), and generated code
makes the real call after the graph, in order with the other replayed effects, from a frame
with the user's file, function name and line (so log records, warning locations, the
``once``/``default`` warning registries, logging levels and filters are Python's own at the
moment of the call).  A call is replayed only when that is exact:

- every argument is a snapshot: a constant (plain data: numbers, strings, bytes, None, and
  tuples of them; for ``print``, also lists and dicts of them, which it formats at once), a
  tensor (the graph's output value, or the input tensor itself; not a computed tensor that
  requires grad, whose ``grad_fn`` the backend decides), or for ``print(file=...)`` an object
  Python can load again (a global, an attribute of a module);
- if the call raised, eager would not handle the exception in the traced code: the call is
  in no ``try`` block of any traced frame (``with`` blocks of grad mode and ``nullcontext``
  are fine: they let exceptions through), and the graph ops after it change nothing in place
  and draw no random numbers (checked when the graph is finished);
- the logging call uses ``stacklevel=1``, no ``exc_info`` or ``stack_info``; ``warn`` uses
  ``stacklevel=1`` and no ``source`` (other stack levels name frames the trace does not
  model);
- a logging call's records reach only handlers that write them out (streams, files, sockets,
  pytest's capture) and plain ``logging.Filter`` name filters, guarded (a handler or filter of
  the user's own may keep what it sees for the code after the call to read).
Anything else breaks the graph as before (DL0014 for ``print``, DL0008 for the others), with
the reason.  ``Logger.isEnabledFor``/``getEffectiveLevel`` are answered at trace time, guarded
on the logger's ``disabled``, its manager's ``disable`` and the levels and parents they read.
Tested by tests/semantics/test_replayed_calls.py.
"""
from __future__ import annotations

import functools
import logging
import sys
import types
import warnings
from typing import Optional

import torch

from .. import graph_breaks as gb
from .. import bytecode_compat
from .. import guards
from ..exc import GraphBreak
from ..source import AttrSource, ItemSource as guards_item, ModuleGlobalSource
from .base import mro_lookup, VariableTracker
from .constant import ConstantVariable, NONE
from .autograd_function import real_function, speculate
from .contexts import GradModeExitVariable
from .nn_module import NNModuleVariable
from .functions import PYTHON_FUNCTION_HANDLERS, PYTHON_FUNCTION_MATCHERS
from .formatted_text import FormattedTextVariable
from .tensor import SymNodeVariable, TensorVariable, record_op
from .sequences import SizeVariable
from .torch_vars import TORCH_CALL_HANDLERS

_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_TORCH_CONSTANTS = (torch.dtype, torch.device, torch.layout, torch.memory_format)


class SnapshotVariable(VariableTracker):
    """A plain value fixed when a replayed call was traced; rebuilt as a constant."""

    def __init__(self, value):
        super().__init__()
        self.value = value

    def _repr_body(self):
        return repr(self.value)

    def reconstruct(self, cg):
        cg.load_const(self.value)

    def can_reconstruct(self):
        return True


def _plain(value, containers: bool) -> bool:
    t = type(value)
    if t in _SCALARS or isinstance(value, _TORCH_CONSTANTS):
        return True
    if t in (tuple, torch.Size):
        return all(_plain(v, containers) for v in value)
    if containers and t is list:
        return all(_plain(v, containers) for v in value)
    if containers and t is dict:
        return all(_plain(k, False) and _plain(v, containers) for k, v in value.items())
    return False


def snapshot(arg: VariableTracker, what: str, containers: bool = False) -> VariableTracker:
    """The tracker a replayed call receives for ``arg``: the value it has now (GraphBreak if
    it cannot be fixed now and rebuilt after the graph)."""
    if isinstance(arg, TensorVariable):
        if arg.source is None and arg.example.requires_grad:
            raise GraphBreak(gb.SIDE_EFFECT, f"{what} of a tensor that requires grad (its grad_fn is the "
                             "backend's after the graph)")
        return arg
    if isinstance(arg, FormattedTextVariable):
        return arg  # formatted after the graph from snapshots taken where the text was made
    if (isinstance(arg, SymNodeVariable) and isinstance(arg.value, (torch.SymInt, torch.SymFloat))) or (
            isinstance(arg, SizeVariable) and any(getattr(i, "symbolic", False) for i in arg.items)):
        return arg  # a symbolic number or shape (immutable): the values the graph returns
    try:
        value = arg.constant_copy()
    except (NotImplementedError, GraphBreak):
        value = _NOT_CONSTANT
    if value is _NOT_CONSTANT or not _plain(value, containers):
        raise GraphBreak(gb.SIDE_EFFECT, f"{what} of {arg.describe()}, whose value cannot be fixed at this "
                         "point to be replayed after the graph")
    return SnapshotVariable(value)


_NOT_CONSTANT = object()


def _constant(arg: Optional[VariableTracker], default):
    if arg is None:
        return default
    if not arg.is_python_constant():
        return _NOT_CONSTANT
    return arg.as_python_constant()


def replay_blocker(tx) -> Optional[str]:
    """Why a call made now cannot be replayed after the graph (None: it can): an exception
    it raised would be handled by a ``try`` block of a traced frame."""
    frame = tx
    while frame is not None:
        inst = frame.current_inst
        if inst is not None:
            for start, end, target, depth, _ in frame.exception_entries():
                if start <= inst.offset < end and not _passes_exceptions(frame, target, depth):
                    return f"it is inside a try block of {frame.code.co_name}"
        frame = frame.parent
    return None


def _passes_exceptions(frame, target: int, depth: int) -> bool:
    """Is the handler at ``target`` the exit of a ``with`` on a context the trace models
    (grad mode, nullcontext), or a clean-up that runs no user code, which lets every exception
    through?"""
    i = frame.offset_to_index.get(target)
    insts = frame.instructions
    if bytecode_compat.is_pass_through_handler(insts, i):
        return True  # (3.12) an inlined comprehension's or a generator's clean-up: re-raises
    if i is None or i + 1 >= len(insts) or insts[i].opname != "PUSH_EXC_INFO" or \
            insts[i + 1].opname != "WITH_EXCEPT_START":
        return False
    if not 0 < depth <= len(frame.stack):
        return False
    exit_fn = frame.stack[depth - 1]
    return isinstance(exit_fn, GradModeExitVariable) and exit_fn.ctx.lets_exceptions_through()


def record(tx, fn, args: list, kwargs: dict, what: str, break_id: str, may_raise: bool = True) -> VariableTracker:
    """Log ``fn(*args, **kwargs)`` (snapshot trackers) to run after the graph; returns None's tracker.
    ``may_raise=False``: the trace knows the call cannot raise, so no ``try`` block can tell it was
    made later."""
    blocker = replay_blocker(tx) if may_raise else None
    if blocker is not None:
        raise GraphBreak(break_id, f"{what} is not replayed after the graph: {blocker}")
    nodes = tx.output.graph.nodes
    tx.output.side_effects.record_call(
        fn=fn, args=list(args), kwargs=dict(kwargs), filename=tx.code.co_filename,
        lineno=tx.lineno or tx.code.co_firstlineno, name=tx.code.co_name, f_globals=tx.f_globals,
        after_node=next(iter(reversed(nodes))) if len(nodes) else None, step=tx.root().steps, what=what,
        user_stack=tx.user_stack())
    return NONE


# ---- print ------------------------------------------------------------------------------------

def _writes_in_python(stream) -> bool:
    """Is ``stream.write`` Python code (a tee, a counter, a user's stream: its state changes when
    print or a log handler writes)?  Unknown streams (no class ``write``) count as yes."""
    write = mro_lookup(type(stream), "write")[0]
    return write is None or isinstance(write, types.FunctionType)


def replay_print(tx, args: list, kwargs: dict) -> VariableTracker:
    what = "print()"
    parts = [snapshot(a, what, containers=True) for a in args]
    options = {}
    for name, value in kwargs.items():
        if name in ("sep", "end"):
            v = _constant(value, None)
            if v is not None and type(v) is not str:
                raise GraphBreak(gb.PRINT, f"print({name}={value.describe()}) (Python raises TypeError)")
            options[name] = SnapshotVariable(v)
        elif name == "flush":
            v = _constant(value, False)
            if v is _NOT_CONSTANT:
                raise GraphBreak(gb.PRINT, "print(flush=...) not known at trace time")
            options[name] = SnapshotVariable(v)
        elif name == "file":
            if value.is_python_constant() and value.as_python_constant() is None:
                options[name] = SnapshotVariable(None)
            elif value.source is not None and not value.is_tensor():
                if _writes_in_python(getattr(value, "value", None)):  # (its type is guarded where it was read)
                    raise GraphBreak(gb.PRINT, f"print(file={value.describe()}): the stream's write() is Python "
                                     "code of your own, whose state the code after the print may read")
                options[name] = value  # loaded again after the graph (sys.stderr, a module's stream)
            else:
                raise GraphBreak(gb.PRINT, f"print(file={value.describe()}): a stream made in the traced code")
        else:
            raise GraphBreak(gb.PRINT, f"print() got an unexpected keyword argument {name!r} (TypeError)")
    if "file" not in options or isinstance(options["file"], SnapshotVariable):  # sys.stdout, read by print
        stdout = sys.stdout
        if _writes_in_python(stdout) and stdout is not None:
            raise GraphBreak(gb.PRINT, f"print() to sys.stdout, a {type(stdout).__name__} whose write() is Python "
                             "code of your own (its state may be read by the code after the print)")
        tx.output.add_guard(guards.TypeGuard(ModuleGlobalSource("sys", "stdout"), type(stdout)))
    try:
        return record(tx, print, parts, options, what, gb.PRINT)
    except GraphBreak as e:
        raise GraphBreak(gb.PRINT, e.reason) from None


# ---- logging ----------------------------------------------------------------------------------

_LOGGER_METHODS = {name: getattr(logging.Logger, name) for name in
                   ("debug", "info", "warning", "warn", "error", "critical", "fatal", "log")}


def _logging_handler(method_name: str, fn):
    def handler(tx, args, kwargs):
        what = f"Logger.{method_name}()"
        if len(args) < (3 if method_name == "log" else 2):
            return None  # a TypeError: inlining breaks as before
        logger = args[0]
        if not logger.can_reconstruct():
            raise GraphBreak(gb.SIDE_EFFECT, f"{what} on a logger Python cannot load after the graph")
        for name, value in kwargs.items():
            v = _constant(value, None)
            if name == "stacklevel" and v == 1 or name in ("exc_info", "stack_info") and v in (None, False):
                continue
            if name == "extra" and value is not None:
                continue
            raise GraphBreak(gb.SIDE_EFFECT, f"{what} with {name}={value.describe()} (it names frames or an "
                             "exception the trace does not replay)")
        _check_handlers_only_write(tx, logger, what)
        parts = [logger] + [snapshot(a, what) for a in args[1:]]
        options = {k: snapshot(v, what, containers=k == "extra") for k, v in kwargs.items()}
        return record(tx, fn, parts, options, what, gb.SIDE_EFFECT)

    return handler


# Handlers and filters whose only trace of a record is output (a stream, a file, a socket, pytest's
# capture read after the test's call): replaying the call after the graph is not observable by the
# rest of the traced code.  A handler of another class (a list of records, a counter, a memory or
# queue handler) or a filter of the user's own may be read by the code that follows: Python makes
# the call where the code makes it.
_OUTPUT_ONLY_HANDLERS = {(h.__module__, h.__qualname__) for h in (
    logging.StreamHandler, logging.FileHandler, logging.NullHandler, type(logging.lastResort))} | {
    ("logging.handlers", name) for name in ("RotatingFileHandler", "TimedRotatingFileHandler", "WatchedFileHandler",
                                            "SocketHandler", "DatagramHandler", "SysLogHandler", "SMTPHandler",
                                            "HTTPHandler")} | {
    ("_pytest.logging", name) for name in ("LogCaptureHandler", "_LiveLoggingStreamHandler",
                                           "_LiveLoggingNullHandler", "_FileHandler")}


# formatters that keep nothing of the records they format (a formatter of the user's own may count them)
_PLAIN_FORMATTERS = {("builtins", "NoneType"), ("logging", "Formatter")} | {
    ("_pytest.logging", name) for name in ("ColoredLevelFormatter", "DatetimeFormatter")}


def handlers_only_write(logger: logging.Logger) -> bool:
    """Do all the handlers and filters a record of ``logger`` reaches only write it out?"""
    node: Optional[logging.Logger] = logger
    while node is not None:
        for f in node.filters:
            if type(f) is not logging.Filter:
                return False
        for h in node.handlers:
            if (type(h).__module__, type(h).__qualname__) not in _OUTPUT_ONLY_HANDLERS or \
                    any(type(f) is not logging.Filter for f in h.filters) or \
                    (type(h.formatter).__module__, type(h.formatter).__qualname__) not in _PLAIN_FORMATTERS or \
                    (isinstance(h, logging.StreamHandler) and h.stream is not None and _writes_in_python(h.stream)):
                return False
        if not node.propagate:
            break
        node = node.parent
    return True


def _check_handlers_only_write(tx, logger_var, what: str) -> None:
    logger = getattr(logger_var, "value", None)
    src = logger_var.source
    if not isinstance(logger, logging.Logger) or src is None:
        return  # (a logger made in the trace has no handlers of its own yet)
    if not handlers_only_write(logger):
        raise GraphBreak(gb.SIDE_EFFECT, f"{what}: a logging handler or filter of your own sees the record when "
                         "the call is made (the code after it may read what it kept)")
    tx.output.add_guard(guards.ExprGuard("{f}(" + src.name() + ")", (("f", handlers_only_write),), src))


for _name, _fn in _LOGGER_METHODS.items():
    PYTHON_FUNCTION_HANDLERS[_fn] = _logging_handler(_name, _fn)


def _logger_state(tx, logger_var, what: str):
    """The real logger behind ``logger_var``, with guards on everything its effective level and
    ``isEnabledFor`` read: its ``disabled``, ``manager.disable``, and the ``level`` and ``parent``
    of each logger up the chain to the first with a level (GraphBreak when that is not plain)."""
    logger = getattr(logger_var, "value", None)
    src = logger_var.source
    if not isinstance(logger, logging.Logger) or src is None:
        raise GraphBreak(gb.CALL_NOT_TRACED, f"{what} on {logger_var.describe()}")
    cls = type(logger)
    if cls.getEffectiveLevel is not logging.Logger.getEffectiveLevel or \
            cls.isEnabledFor is not logging.Logger.isEnabledFor:
        raise GraphBreak(gb.CALL_NOT_TRACED, f"{what} of a logger class that overrides it")
    side_effects = tx.output.side_effects
    if any(side_effects.load_attr(logger_var, n) is not None for n in ("level", "parent", "disabled", "manager")):
        raise GraphBreak(gb.CALL_NOT_TRACED, f"{what} of a logger changed in the traced code")
    add = tx.output.add_guard
    add(guards.ConstGuard(AttrSource(src, "disabled"), logger.disabled))
    add(guards.ConstGuard(AttrSource(AttrSource(src, "manager"), "disable"), logger.manager.disable))
    node, node_src = logger, src
    while True:
        if type(node.level) is not int:
            raise GraphBreak(gb.CALL_NOT_TRACED, f"{what}: a logger level that is not an int")
        add(guards.ConstGuard(AttrSource(node_src, "level"), node.level))
        if node.level:
            break
        parent_src = AttrSource(node_src, "parent")
        add(guards.IdGuard(parent_src, node.parent))
        if node.parent is None:
            break
        node, node_src = node.parent, parent_src
    return logger


def _is_enabled_for(tx, args, kwargs):
    if len(args) != 2 or kwargs or not args[1].is_python_constant() or type(args[1].as_python_constant()) is not int:
        return None
    logger = _logger_state(tx, args[0], "Logger.isEnabledFor()")
    level = args[1].as_python_constant()
    if logger.disabled:
        return ConstantVariable(False)
    # what isEnabledFor reads next: its cache (filled by earlier calls, cleared by setLevel)
    cache_src = AttrSource(args[0].source, "_cache")
    cache = logger.__dict__.get("_cache")
    if type(cache) is not dict or not all(type(k) is int for k in cache):
        raise GraphBreak(gb.CALL_NOT_TRACED, "Logger.isEnabledFor(): an unusual level cache")
    if level in cache:
        tx.output.add_guard(guards.ConstGuard(guards_item(cache_src, level), cache[level]))
        return ConstantVariable(bool(cache[level]))
    tx.output.add_guard(guards.DictKeysGuard(cache_src, tuple(cache)))  # (so not cached yet)
    if logger.manager.disable >= level:
        return ConstantVariable(False)
    return ConstantVariable(level >= logger.getEffectiveLevel())


def _get_effective_level(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        return None
    return ConstantVariable(_logger_state(tx, args[0], "Logger.getEffectiveLevel()").getEffectiveLevel())


PYTHON_FUNCTION_HANDLERS[logging.Logger.isEnabledFor] = _is_enabled_for
PYTHON_FUNCTION_HANDLERS[logging.Logger.getEffectiveLevel] = _get_effective_level


def _once_logging_handler(fn) -> Optional[object]:
    """transformers' ``logger.warning_once``/``info_once``: functools.lru_cache'd functions that
    call ``self.warning``/``self.info`` once per arguments; replayed through the cache itself."""
    if not isinstance(fn, functools._lru_cache_wrapper):
        return None
    inner = getattr(fn, "__wrapped__", None)
    if getattr(inner, "__module__", None) != "transformers.utils.logging" or \
            getattr(inner, "__name__", None) not in ("warning_once", "info_once"):
        return None
    return _logging_handler(inner.__name__, fn)


PYTHON_FUNCTION_MATCHERS.append(_once_logging_handler)


# ---- warnings ---------------------------------------------------------------------------------

def replay_warn(tx, message, category=None, stacklevel=None, source=None) -> VariableTracker:
    what = "warnings.warn()"
    level = _constant(stacklevel, 1)
    if type(level) is not int or level > 1:
        raise GraphBreak(gb.SIDE_EFFECT, f"{what} with stacklevel={level!r}: the warning names a caller frame, "
                         "which the trace does not replay")
    if source is not None and _constant(source, None) is not None:
        raise GraphBreak(gb.SIDE_EFFECT, f"{what} with a source object")
    cat = _constant(category, None)
    if cat is not None and not (isinstance(cat, type) and issubclass(cat, Warning)):
        raise GraphBreak(gb.SIDE_EFFECT, f"{what} with category {category.describe()} (Python raises TypeError)")
    text = _constant(message, _NOT_CONSTANT)
    if type(text) is not str:
        raise GraphBreak(gb.SIDE_EFFECT, f"{what} of {message.describe()}: only a message string known at trace "
                         "time is replayed")
    args = [SnapshotVariable(text), SnapshotVariable(cat), SnapshotVariable(1)]
    return record(tx, warnings.warn, args, {}, what, gb.SIDE_EFFECT)


# ---- torch's API usage log ---------------------------------------------------------------------

def _log_api_usage_once(tx, args, kwargs) -> VariableTracker:
    """``torch._C._log_api_usage_once(event)`` (library constructors call it: torchmetrics'
    ``Metric.__init__``): logs the event to the process's usage logger, returns None."""
    what = "torch._C._log_api_usage_once()"
    if len(args) != 1 or kwargs:
        raise GraphBreak(gb.SIDE_EFFECT, f"{what} with {len(args)} arguments (Python raises TypeError)")
    event = snapshot(args[0], what)
    if type(event.value) is not str:
        raise GraphBreak(gb.SIDE_EFFECT, f"{what} of {args[0].describe()} (Python raises TypeError)")
    return record(tx, torch._C._log_api_usage_once, [event], {}, what, gb.SIDE_EFFECT)


TORCH_CALL_HANDLERS[id(torch._C._log_api_usage_once)] = _log_api_usage_once


# ---- Tensor.register_hook ----------------------------------------------------------------------

class HookHandleVariable(VariableTracker):
    """The RemovableHandle ``register_hook`` (or a module's ``register_forward_hook``) returns.
    Dropping it is free; anything else (``remove()``, keeping it past the trace) makes the
    trace stop before the registering call, and Python makes the call and the handle."""

    def __init__(self, step: int, where: list, what: str = "Tensor.register_hook()"):
        super().__init__()
        self.step = step
        self.where = where
        self.what = what  # the registering call, for the break's reason

    def python_type(self):
        return torch.utils.hooks.RemovableHandle

    def describe(self):
        return f"the handle {self.what} returns"

    def _python_registers(self, why: str) -> GraphBreak:
        brk = GraphBreak(gb.SIDE_EFFECT, f"{self.what} whose handle {why}: Python registers the hook")
        brk.restart_step = self.step
        brk.user_stack = list(self.where)
        return brk

    def var_getattr(self, tx, name):
        raise self._python_registers(f"is used (.{name})")

    def call_method(self, tx, name, args, kwargs):
        raise self._python_registers(f"is used (.{name}())")

    def reconstruct(self, cg):
        raise self._python_registers("outlives the traced code")

    def can_reconstruct(self):
        return False


def register_tensor_hook(tx, tensor, hook) -> VariableTracker:
    """``tensor.register_hook(hook)`` in traced code (TorchDynamo captures it too).

    - ``tensor`` read from the frame's inputs: the call is replayed after the graph on the same
      tensor with the hook rebuilt (gradients only reach it in a later backward, which the
      hook then sees exactly as in eager);
    - ``tensor`` computed in the graph: a graph node registers the real hook function on the
      tensor the graph computes (a functionalising backend such as aot_eager traces the hook
      into the backward graph, as TorchDynamo's register_hook op does), so the hook must be a
      function the graph can hold (not a closure over values of the trace) and pure tensor
      code: it is first run as a dry run over a stand-in gradient, and a print, a side effect
      or a graph break in it makes the call a graph break (Python registers it).
    A tensor that does not require grad: Python raises, so the graph breaks there."""
    what = "Tensor.register_hook()"
    if not tensor.example.requires_grad:
        raise GraphBreak(gb.OPERATION_RAISES, f"{what} on a tensor that does not require grad (RuntimeError)")
    step, where = tx.root().steps, tx.user_stack()
    if tensor.source is not None and tensor.node.op == "placeholder":
        if not hook.can_reconstruct():
            raise GraphBreak(gb.SIDE_EFFECT, f"{what} with {hook.describe()}, which cannot be rebuilt after the graph")
        record(tx, torch.Tensor.register_hook, [tensor, hook], {}, what, gb.SIDE_EFFECT)
        return HookHandleVariable(step, where)
    fn = real_function(hook)
    if fn is None:
        raise GraphBreak(gb.SIDE_EFFECT, f"{what} of {hook.describe()} on a tensor computed in the graph: "
                         "a closure over values of the traced code; Python registers it")

    def body():
        grad = record_op(tx, "call_function", torch.empty_like, [tensor], {})
        return hook.call_function(tx, [grad], {})

    result = speculate(tx, body, f"{what} of {hook.describe()}")
    if not (result.is_python_constant() and result.as_python_constant() is None) and \
            not isinstance(result, TensorVariable):
        raise GraphBreak(gb.SIDE_EFFECT, f"{what}: the hook returns {result.describe()}; Python registers it")
    record_op(tx, "call_function", _hook_registrar(fn), [tensor], {})
    tensor.node = next(iter(reversed(tx.output.graph.nodes)))  # later uses follow the registration
    return HookHandleVariable(step, where)


def _hook_registrar(fn):
    """The graph's target: ``register_hook_op(t, fn)`` registers ``fn`` on ``t`` and returns it."""
    from torch._higher_order_ops.register_hook import register_hook_op  # lazy: an optional torch module

    def register_hook(t):
        return register_hook_op(t, fn)
    register_hook.__name__ = register_hook.__qualname__ = "register_hook"
    return register_hook


VariableTracker.register_tensor_hook = staticmethod(register_tensor_hook)  # see VariableTracker.register_tensor_hook


def enable_grad_after_graph(tx, tensor) -> VariableTracker:
    """``tensor.requires_grad_()`` (or ``tensor.requires_grad = True``) on a float tensor that does
    not require grad, so a leaf (a test's ``x.double().requires_grad_()``, torchsde's
    ``p.detach().requires_grad_(True)``): the graph computes the tensor, and the call is replayed
    after it on the tensor the graph returns (or the input itself), in order with the other
    replayed effects.  Until then the trace's tensor does not require grad: any later use of it in
    the trace ends the graph before this call when the frame's own code made it
    (TensorVariable.grad_enabled_later), so Python makes it and the code after it (a resume function)
    gets the leaf as an input: everything it then does with the tensor is captured there, not broken
    at each use in nested calls (wav2vec2's feature encoder); made in a function the frame calls, the
    graph ends at the use."""
    what = "Tensor.requires_grad_()"
    if not (tensor.example.is_floating_point() or tensor.example.is_complex()):
        raise GraphBreak(gb.OPERATION_RAISES, f"{what} on a {tensor.example.dtype} tensor (RuntimeError)")
    # (a float tensor that does not require grad is a leaf: the call cannot raise)
    record(tx, torch.Tensor.requires_grad_, [tensor], {}, what, gb.SIDE_EFFECT, may_raise=False)
    # (made by the frame's own code, not a function it calls: restarting at the call of such a
    # function would make it a frame of its own, torchsde's get_state, returning the leaf to code
    # that uses it at once)
    tensor.grad_enabled_later = (tx.root().steps if tx is tx.root() else None, tx.user_stack())
    return tensor


VariableTracker.enable_grad_after_graph = staticmethod(enable_grad_after_graph)  # see VariableTracker.enable_grad_after_graph


# ---- Module.register_forward_hook / register_forward_pre_hook ---------------------------------

def _module_hook_handler(fn, options: tuple):
    """``module.register_forward_hook(hook, ...)`` (or ``register_forward_pre_hook``) on a module
    read from the frame's inputs, with a hook generated code can rebuild and option flags known
    at trace time: replayed after the graph (transformers' output-capturing hooks, installed
    on the first call).  The module's hooks change only then, so until the end of the trace
    anything that would see them (calling the module, reading its hook dicts:
    ``OutputGraph.pending_module_hooks``) makes the trace stop before the registration, and
    Python registers it there; so does any use of the handle.  Anything else returns None:
    inlining breaks as before."""
    what = f"Module.{fn.__name__}()"

    def handler(tx, args, kwargs):
        kwargs = dict(kwargs)
        if len(args) == 1 and "hook" in kwargs:
            args = [args[0], kwargs.pop("hook")]
        if len(args) != 2 or not set(kwargs) <= set(options):
            return None  # a TypeError
        module, hook = args
        if not isinstance(module, NNModuleVariable) or module.source is None:
            return None
        flags = {}
        for name, value in kwargs.items():
            flag = _constant(value, _NOT_CONSTANT)
            if type(flag) is not bool:
                return None
            flags[name] = SnapshotVariable(flag)
        if not hook.can_reconstruct():
            raise GraphBreak(gb.SIDE_EFFECT, f"{what} with {hook.describe()}, which cannot be rebuilt after the graph")
        step, where = tx.root().steps, tx.user_stack()
        record(tx, fn, [module, hook], flags, what, gb.SIDE_EFFECT)
        tx.output.pending_module_hooks.setdefault(id(module.value), (step, where, what))
        return HookHandleVariable(step, where, what)

    return handler


PYTHON_FUNCTION_HANDLERS[torch.nn.Module.register_forward_hook] = _module_hook_handler(
    torch.nn.Module.register_forward_hook, ("prepend", "with_kwargs", "always_call"))
PYTHON_FUNCTION_HANDLERS[torch.nn.Module.register_forward_pre_hook] = _module_hook_handler(
    torch.nn.Module.register_forward_pre_hook, ("prepend", "with_kwargs"))


def replay_warning(tx, message: str, category) -> VariableTracker:
    """A warning a traced torch operation issues (torch.tensor(tensor)'s copy-construct
    UserWarning): replayed after the graph from the user's line, as Python would issue it
    from the C call there (same category, message, file, line and ``once`` registry)."""
    args = [SnapshotVariable(message), SnapshotVariable(category), SnapshotVariable(1)]
    return record(tx, warnings.warn, args, {}, "a warning of a torch operation", gb.SIDE_EFFECT)


VariableTracker.replay_warning = staticmethod(replay_warning)  # see VariableTracker.replay_warning

__all__ = ["replay_warning", "SnapshotVariable", "snapshot", "replay_blocker", "record", "replay_print", "replay_warn"]
