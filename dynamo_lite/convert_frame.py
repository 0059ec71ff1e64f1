"""One frame -> a cache entry, or "run it eagerly".

``FrameConverter`` is the Python callback the C hook calls on a cache miss:
``converter(code, f_locals, func)`` returns one of (the protocol of csrc/cache_entry.c)

    _C.CacheEntry(check, new_code, owner, compile_id=..., guard=..., graph_module=...)
                     C stores it on ``code`` and runs it now (new_code None: the original code)
    _C.SKIP          never look at this code again (until reset)
    _C.RUN_EAGER     run the original code this time, remember nothing

Entries are read back through ``cache.entries`` (the C cache is the only copy).

    __call__
      -> _skip_reason            files we never trace; our own generated code
      -> cache-size limit        eager once the limit is reached (one warning)
      -> _compile
           -> _trace             InstructionTranslator.run(); on GraphBreak trace
                                 again, stopping before the breaking step
           -> collect outputs    first codegen pass
           -> OutputGraph.finalize + backend
           -> build_code         transformed bytecode (+ resume functions)
           -> guards.compile
A recompile whose trace again captures nothing (no graph, no break, and no entry of the code
holds a graph) answers SKIP: the frame runs as Python runs it from then on.
Errors: GraphBreak with fullgraph -> Unsupported; SkipFrame -> eager (SKIP);
a failing backend -> BackendCompilerFailed (eager, with one warning per frame, under
config.suppress_errors); internal errors -> logged, eager (raised when
config.raise_internal_errors).
Tested by tests/api/test_api.py and tests/api/test_recompiles.py.
"""
from __future__ import annotations

import functools
import gc
import itertools
import logging
import os
import sys
import threading
import time
import traceback
import types
from typing import Optional

import numpy as np
import torch
import torch._guards

from . import graph_breaks as gb
from . import _C, bytecode_compat, cache, config, persistent_cache, stance, torch_compat
from . import log as dl_log
from .codegen import frame_code, loop_bodies
from .codegen.liveness import flow_info
from .codegen.pycodegen import CodegenFailed
from .exc import BackendCompilerFailed, GraphBreak, RecompileError, SkipFrame, Unsupported, UserFrame
from .graph.output_graph import OutputGraph
from .graph.side_effects import ReplayNotExact
from .guards import GuardSet, NoOtherTracerGuard, TypeGuard
from .report import events
from .backends import lookup_backend
from .backends.ddp import split_backend
from .shapes import CannotSymbolize, FrameSizes, ShapeTracker, frame_is_static
from .cache import display_name, is_loop_body
from .skipfiles import skip_reason
from .source import LocalSource
from .symbolic.inliner import unclosed_generator
from .symbolic.translator import InstructionTranslator, InstructionTranslatorBase

log = logging.getLogger("dynamo_lite")
breaks_log = logging.getLogger("dynamo_lite.graph_breaks")
recompiles_log = logging.getLogger("dynamo_lite.recompiles")
guards_log = logging.getLogger("dynamo_lite.guards")
graph_code_log = logging.getLogger("dynamo_lite.graph_code")
bytecode_log = logging.getLogger("dynamo_lite.bytecode")

_CONVERT_LOCK = threading.RLock()
RUN_EAGER = _C.RUN_EAGER  # the callback's "run the original code this time" answer
entries_for = cache.entries  # (the name tests use)


def _made_by_namedtuple(func) -> bool:
    """collections.namedtuple's ``__new__``, compiled from a string in a namespace of its own
    (``__name__`` "namedtuple_<typename>"): it only builds a tuple, nothing to capture."""
    name = func.__globals__.get("__name__") if isinstance(func, types.FunctionType) else None
    return isinstance(name, str) and name.startswith("namedtuple_")


def _recompile_message(code, reasons: list) -> str:
    where = f"{display_name(code)} ({code.co_filename}:{code.co_firstlineno})"
    if not reasons:
        return (f"{where} would be compiled while the stance is 'fail_on_recompile': it was not compiled "
                "before (run it once under the default stance, e.g. during warm-up)")
    failures = "\n".join(f"    - {r}" for r in reasons)
    return (f"{where} would be compiled again while the stance is 'fail_on_recompile'; the guards that "
            f"failed, newest entry first:\n{failures}")


class FrameConverter:
    """The hook callback for one compile() / optimize() configuration.

    Cache entries it creates carry it as their owner: the C hook uses an entry
    only while its owner is the callback, so the same function compiled with
    another backend (or fullgraph=True) gets entries of its own.  api.py makes
    one converter per configuration, so compile() calls that agree share them.
    """

    def __init__(self, backend, backend_name: str, fullgraph: bool = False, dynamic=None):
        self.backend = backend
        self.backend_name = backend_name
        self._graph_as_is = _runs_graph_as_is(backend)
        # what compile() was given: the backend before mode= / options= were applied, and the
        # inductor config patches they make (api.py; a pickled compiled module keeps them)
        self.base_backend = backend
        self.inductor_patches: dict = {}
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        # tracing again after a shape fact we cannot guard: "floats" (static floats) or "all"
        # (static shapes); "" when not
        self._static_retry = ""

    def __call__(self, code: types.CodeType, f_locals: dict, func):
        with _CONVERT_LOCK:  # threads convert one frame at a time (cache limit, no duplicate entries)
            result = self._convert(code, f_locals, func)
        cache.record(code, result)
        return result

    def _convert(self, code: types.CodeType, f_locals: dict, func):
        if cache.is_generated(code):
            return _C.SKIP
        reason = skip_reason(code.co_filename, code.co_name)
        if reason is not None:
            return _C.SKIP
        if isinstance(func, types.FunctionType) and func.__dict__.get("_dynamo_lite_disabled") == "frame":
            return RUN_EAGER  # disable(fn, recursive=False): this frame runs as it is, its callees are captured
        if code.co_filename == "<string>" and _made_by_namedtuple(func):
            return _C.SKIP  # a namedtuple's generated __new__ (called from torch's tensor repr...)
        if not bytecode_compat.SUPPORTED:
            return _C.SKIP
        tracer = foreign_tracer()
        if tracer is not None:
            # another tracer or compiler runs this frame: it must see the original code
            breaks_log.debug("%s runs natively: %s is active", display_name(code), tracer)
            return RUN_EAGER
        existing = cache.entries(code, self)
        capturable = self.fullgraph or _has_tensor_or_module(
            f_locals, func, look_inside=cache.is_compile_target(code) or cache.generated_kind(code) is not None)
        now = stance.current()
        if now == "eager_on_recompile":
            return RUN_EAGER  # compiled code runs when its guards pass (C); a miss runs eagerly
        if not capturable and len(existing) < config.cache_size_limit:
            # nothing to capture in this call: not a recompile either (torchsde's _Interval._randn,
            # compiled for one class of self and called for another with no tensor in reach, was
            # reported as recompiling, and explained its guard failures, on every call)
            return _nothing_to_capture(code, f_locals)
        if existing:
            reasons = [e.guard.explain_failure(tuple(f_locals[n] for n in bytecode_compat.arg_names(code)
                                                     if n in f_locals), func.__globals__, func)
                       for e in existing]
            if None in reasons:
                return RUN_EAGER  # another thread compiled a matching entry while this one waited
        if (persistent_cache.enabled() or persistent_cache.has_packages()) \
                and len(existing) < config.cache_size_limit and not self._static_retry \
                and capturable and not torch._C._len_torch_function_stack() \
                and split_backend(self.backend) is self.backend:
            loaded = persistent_cache.load(self, code, f_locals, func,
                                           f"{cache.frame_id(code)}/{len(existing)}")
            if loaded is not None:  # an entry an earlier process stored: no trace
                if existing:
                    _note_recompile(code, loaded.compile_id, reasons)
                return loaded
        if now == "fail_on_recompile" and capturable:
            raise RecompileError(_recompile_message(code, reasons if existing else []))
        # entries C dropped because an object their guard held weakly died count too, beyond the
        # limit (a model rebuilt and dropped drops one entry; an object made anew for every call
        # would otherwise recompile on every call)
        gone = cache.dropped(code)
        if existing or gone >= config.cache_size_limit:
            if len(existing) >= config.cache_size_limit or gone >= config.cache_size_limit:
                if not existing:
                    reasons = [f"the objects {gone} entries compared by identity died between calls"]
                if cache.first_limit_hit(code):
                    # loop bodies made for graph breaks in loops are specialised per iteration
                    # value and expected to reach the limit: not worth a warning; nor is a frame
                    # none of whose entries captured a graph (no tensor work is left to eager:
                    # e.g. transformers installing hooks, recursively, on every submodule)
                    quiet = is_loop_body(code) or bool(existing) and all(e.graph_module is None for e in existing)
                    level = logging.INFO if quiet else logging.WARNING
                    log.log(level, "dynamo_lite: %s (%s:%d) hit config.cache_size_limit=%d; it now runs eagerly "
                                "when no compiled entry matches. Last guard failure: %s%s",
                                display_name(code), code.co_filename, code.co_firstlineno, config.cache_size_limit,
                                reasons[0], _limit_hint(code))
                    events.emit(events.CacheLimitEvent(display_name(code), code.co_filename, code.co_firstlineno,
                                                       config.cache_size_limit, reasons))
                # the fallback entry: kept last by C, it runs the original code whenever no compiled
                # entry matches, without calling back here (the limit is final until reset())
                return _C.CacheEntry(_C.ALWAYS, None, self)
        if not capturable:
            return _nothing_to_capture(code, f_locals)
        compile_id = f"{cache.frame_id(code)}/{len(existing) + gone}"
        if existing:
            _note_recompile(code, compile_id, reasons)
        if torch._C._len_torch_function_stack():
            # a torch-function mode is active (a default device, `with torch.device(...)`, a user
            # mode): it decides what torch calls do, and traces do not model it; run eagerly
            reason = ("a torch function mode is active (torch.set_default_device, `with torch.device(...)` "
                      "or a TorchFunctionMode)")
            if self.fullgraph:
                raise Unsupported(gb.FRAME_SKIPPED, reason, user_stack=[_code_frame(code)])
            self._fallback(code, reason, gb.FRAME_SKIPPED, [_code_frame(code)], compile_id)
            return RUN_EAGER
        # Tracing allocates many short-lived objects: a full collection of a big process
        # (torch, transformers) in the middle of a capture costs hundreds of milliseconds.
        gc_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._compile(code, f_locals, func, compile_id)
        finally:
            if gc_enabled:
                gc.enable()
                # the trace's trackers form cycles that hold real objects of the frame (a generator
                # Python must close when it drops it, a tensor): free them now, not at some later GC
                # (objects made while collection was off are all in the youngest generation)
                gc.collect(0)

    # ---- compile one frame ------------------------------------------------
    def _compile(self, code, f_locals, func, compile_id):
        shadowed = _shadow_saved_tensor_hooks()
        if shadowed is None:
            return RUN_EAGER  # the user's saved-tensor hooks cannot be shadowed now
        try:
            try:
                return self._compile_inner(code, f_locals, func, compile_id)
            except CannotSymbolize as e:
                # a shape fact with no guard kind of ours: never guess, trace again with static
                # floats when only a float fact was refused (symbolic ints and sizes kept: an
                # int that changes between calls would otherwise compile once per value), else
                # with static shapes
                try:
                    return self._retry(code, f_locals, func, compile_id, e, "floats" if e.floats else "all")
                except CannotSymbolize as again:
                    return self._retry(code, f_locals, func, compile_id, again, "all")
        except Unsupported:
            raise
        except SkipFrame as e:
            self._fallback(code, e.reason, e.break_id, e.user_stack or [_code_frame(code)], compile_id)
            if self.fullgraph:
                raise Unsupported(e.break_id, e.reason, user_stack=e.user_stack or [_code_frame(code)]) from None
            return _C.SKIP if e.permanent else RUN_EAGER
        except BackendCompilerFailed as e:
            if not config.suppress_errors or self.fullgraph:
                raise  # torch.compile's default: the user sees the backend's error
            if cache.first_backend_failure(code):
                log.warning("dynamo_lite: %s; running %s eagerly (config.suppress_errors=True)", e,
                            display_name(code))
            self._fallback(code, str(e), gb.BACKEND_FAILED, [_code_frame(code)], compile_id)
            guard = e.fallback_guard
            if guard is None:
                return RUN_EAGER
            # calls that pass the same guards run the original code: the backend is not retried
            return _C.CacheEntry(guard.fn, None, self, compile_id=compile_id, guard=guard)
        except Exception as e:  # noqa: BLE001 - a dynamo_lite bug: never the user's problem
            if config.raise_internal_errors:
                raise
            text = f"internal error {type(e).__name__}: {e}"
            log.warning("dynamo_lite: %s while converting %s (%s:%d); running it eagerly.\n%s", text,
                        display_name(code), code.co_filename, code.co_firstlineno, traceback.format_exc())
            self._fallback(code, text, gb.INTERNAL_ERROR, [_code_frame(code)], compile_id)
            return _C.SKIP
        finally:
            if shadowed:
                torch._C._autograd._pop_saved_tensors_default_hooks()

    def _fallback(self, code, reason, break_id, user_stack, compile_id):
        breaks_log.info("[%s] %s runs eagerly: [%s] %s", compile_id, display_name(code), break_id, reason)
        if events.listening():
            events.emit(events.FallbackEvent(break_id, reason, list(user_stack), display_name(code), compile_id,
                                             caller_stack=_callers(code)))

    def _compile_inner(self, code, f_locals, func, compile_id):


        start = time.perf_counter()
        break_event = None
        tx, brk = self._trace(code, f_locals, func, None)
        step = tx.break_step if brk is not None else None
        step_ips, tx_first = tx.step_ips, tx
        for _ in range(8):
            if step is not None and step < len(step_ips):
                # a break inside a loop run through its body function: the graph ends where the
                # iteration began, so the body's capture serves this iteration too
                begun = frame_code.iteration_start(code, step_ips[step], step_ips, step, tx_first.iteration_locals)
                step = step if begun is None else begun
            tx, state = self._frame_state(code, f_locals, func, tx, brk, step)
            if state is None:
                return RUN_EAGER
            try:
                unclosed = unclosed_generator(tx.output)
                if unclosed is not None:  # Python must make it, to close it when it is dropped
                    raise CodegenFailed("a generator is left paused in a try/with block") from \
                        unclosed.escape("is left paused inside a try/with block (closing it runs code)")
                outputs = frame_code.collect_graph_outputs(state)
                if brk is not None:
                    break_event = self._report_break(code, compile_id, brk, tx)
                break
            except ReplayNotExact as e:
                # a call replayed after the graph must run where it is instead: stop before it
                e.brk.user_stack = e.brk.user_stack or [_code_frame(code)]
                brk, step = e.brk, e.brk.restart_step if step is None else min(step, e.brk.restart_step)
            except CodegenFailed as e:
                # a generator made in the trace must exist for real: stop where it was made
                escape = e.__cause__
                if not isinstance(escape, GraphBreak) or escape.restart_step is None:  # e.g. GeneratorEscapes
                    raise
                escape.user_stack = escape.user_stack or [_code_frame(code)]
                brk, step = escape, escape.restart_step if step is None else min(step, escape.restart_step)
        else:
            raise SkipFrame(gb.CALL_NOT_TRACED, "generators made in the trace kept escaping it")
        trace_seconds = time.perf_counter() - start
        output = tx.output
        compiled = None
        compiled_fn = None
        gm = None
        compile_seconds = 0.0
        graph_inputs = []
        output.guard_mutated_objects_distinct()
        if output.shapes.used:
            self._shape_guards(output)  # (a fact we cannot guard: static retry before any backend work)
        if output.count_ops() or outputs:
            output.compile_id = compile_id
            graph_inputs = output.finalize(outputs)
            try:
                gm, compiled_fn, compile_seconds = output.compile(split_backend(self.backend), self.backend_name)
            except BackendCompilerFailed as e:
                # (with suppress_errors: an entry that runs the original code for these inputs)
                e.fallback_guard = output.guards.compile(bytecode_compat.arg_names(code))
                raise
            compiled = _C.CallWithHookOff(compiled_fn)
            compiled_fn.owner = compiled  # the first result is checked, then the check is dropped
        if output.shapes.used:
            self._shape_guards(output)  # again: the backend may have relied on more
        # (a trace that answered torch.compiler.is_compiling() True took the compiler's path: running
        # the frame as it is would take the other one, so its code stays, as torch.compile keeps it)
        asked_compiling = bool(output.compiling_queries)
        if compiled is None and brk is None and not asked_compiling and _traced_empty_before(code, self):
            # traced again and again nothing to capture (no tensor work, no break): from now on the
            # frame runs as it is, as Python runs it (torch.compile skips such a frame at once);
            # einx's shape solver and code generator would otherwise recompile until the limit
            breaks_log.debug("[%s] %s captured nothing again: it runs as it is from now on", compile_id,
                             display_name(code))
            output.release_examples()
            return _C.SKIP
        output_index = {node: i for i, node in enumerate(outputs)}
        state.prologue_calls = list(output.prologue_calls)
        if compiled is None and brk is None and output.side_effects.is_empty() and not state.root_cells \
                and state.grad_mode is None and not state.prologue_calls and not output.modelled_library_code \
                and not asked_compiling:
            new_code = None  # nothing captured: guards pass -> run the original frame
        else:
            new_code = frame_code.build_code(state, compiled, graph_inputs, output_index,
                                            rerun_on_error=compiled is not None and output.can_rerun_on_error(),
                                            grad_enabled=output.initial_grad_enabled)
            cache.add_generated(new_code)
        guard = output.guards.compile(bytecode_compat.arg_names(code))
        if gm is not None:
            graph_code_log.info("[%s] Graph of %s:\n%s", compile_id, display_name(code),
                                dl_log.lazy(gm.print_readable, print_output=False))
            events.emit(events.GraphEvent(compile_id, display_name(code), code.co_filename, code.co_firstlineno, gm,
                                          output.count_ops(), output.guards.render(), compile_seconds,
                                          trace_seconds, self.backend_name,
                                          compiling_queries=list(dict.fromkeys(output.compiling_queries))))
        guards_log.info("[%s] Guards of %s:\n%s", compile_id, display_name(code),
                        dl_log.lazy(lambda: "\n".join(output.guards.render())))
        if new_code is not None:
            bytecode_log.info("[%s] Bytecode of %s:\n%s", compile_id, display_name(code),
                              dl_log.lazy(dl_log.format_code_change, code, new_code))
        if persistent_cache.enabled():
            persistent_cache.store(self, code, func, output.guards, bytecode_compat.arg_names(code), new_code,
                                   compiled_fn, gm, output.graph_inputs if gm is not None else [],
                                   output.hash_seed_dependent, output.process_dependent, output.process_values,
                                   break_event, {"ops": output.count_ops(),
                                                 "queries": list(dict.fromkeys(output.compiling_queries))})
        output.release_examples()
        return _C.CacheEntry(guard.fn, new_code, self, compile_id=compile_id, guard=guard, graph_module=gm)

    @staticmethod
    def _shape_guards(output) -> None:
        for guard in output.shapes.produce_guards():
            output.add_guard(guard)

    def _report_break(self, code, compile_id, brk, tx) -> None:
        event = events.GraphBreakEvent(brk.break_id, brk.reason, list(brk.user_stack), display_name(code),
                                       compile_id, tx.instructions[tx.ip].opname,
                                       caller_stack=_callers(code))
        breaks_log.info("[%s] Graph break in %s: [%s] %s\n%s", compile_id, display_name(code), brk.break_id,
                        brk.reason, "\n".join(str(f) for f in brk.user_stack))
        breaks_log.debug("[%s] Trackers at the break in %s, before %s (what the generated code rebuilds):\n%s",
                         compile_id, display_name(code), event.instruction, dl_log.lazy(_tracker_state, tx))
        events.emit(event)
        return event

    def _frame_state(self, code, f_locals, func, tx, brk, step):
        """(translator, FrameState) for a full capture (brk None) or a break at root step
        ``step`` (traced again to stop there); (None, None): run the frame eagerly."""
        if brk is None:
            state = frame_code.FrameState(code, tx.output.side_effects, _root_cells(tx, code),
                                         tx.frame_locals(), [], tx.return_value)
        else:
            if self.fullgraph:
                if brk.user_exception:
                    return None, None  # the user's code raises: run it so Python raises it
                raise Unsupported(brk.break_id, brk.reason, user_stack=brk.user_stack)
            tx, again = self._trace(code, f_locals, func, step)
            if again is not None or not tx.stopped:
                raise SkipFrame(gb.INTERNAL_ERROR, f"trace was not reproducible up to the graph break ({brk.reason})")
            state = frame_code.FrameState(code, tx.output.side_effects, _root_cells(tx, code),
                                         tx.frame_locals(), list(tx.stack), None, tx.ip)
        output = tx.output
        state.random_calls = [call[:3] for call in output.random_calls]  # (fn, args, kwargs)
        state.random_inputs = list(output.random_inputs)
        state.made_before_graph = dict(output.made_before_graph)
        if output.grad_enabled != output.initial_grad_enabled or brk is not None:
            # at a break, rebuilding entered grad-mode contexts sets the mode: set it last
            state.grad_mode = output.grad_enabled
        return tx, state

    def _retry(self, code, f_locals, func, compile_id, why: CannotSymbolize, static: str):
        """Trace again with static floats (``static="floats"``) or static shapes (``"all"``)."""
        what = "static floats" if static == "floats" else "static shapes"
        log.info("dynamo_lite: %s: %s; tracing again with %s", display_name(code), why, what)
        self._static_retry = static
        try:
            return self._compile_inner(code, f_locals, func, compile_id)
        finally:
            self._static_retry = ""

    def _trace(self, code, f_locals, func, stop_at_step):
        dynamic = False if self._static_retry == "all" else self.dynamic
        # float arguments stay static for a backend that runs AOTAutograd: its pass turning symbolic
        # floats into tensors fails on some ops and then keeps process-wide state that would
        # specialise later graphs' floats without a guard (a stale constant)
        shapes = ShapeTracker(dynamic, cache.frame_sizes(code, FrameSizes), static=frame_is_static(f_locals, code),
                              static_floats=self._static_retry == "floats" or not self._graph_as_is)
        output = OutputGraph(code, func.__globals__, func, "", shapes)
        output.backend_runs_graph_as_is = self._graph_as_is
        output.add_guard(NoOtherTracerGuard())  # so a cached entry never runs under another tracer
        grad = torch.is_grad_enabled()
        try:
            try:
                tx = InstructionTranslator(output, code, func, f_locals, stop_at_step)
            except GraphBreak as e:
                raise SkipFrame(e.break_id, f"cannot read the frame's arguments: {e.reason}") from e
            tx.run()
        except GraphBreak as e:
            return tx, e
        finally:
            output.leave_global_modes()
            torch._C._set_grad_enabled(grad)
        return tx, None


def _runs_graph_as_is(backend) -> bool:
    """Does the backend run the graph's ops as they are (``eager``, or a backend that says so with
    ``runs_graph_as_is``, as testing.CompileCounter around it does), not functionalized and decomposed by
    AOTAutograd (a user's own backend may be anything: no)?"""
    return backend is lookup_backend("eager")[0] or getattr(backend, "runs_graph_as_is", False) is True


def foreign_tracer() -> Optional[str]:
    """The tracer or compiler other than dynamo_lite that is running this thread's code right
    now (its frames must run natively, untouched), or None.  Reads state only."""
    if torch._C._get_tracing_state() is not None:
        return "torch.jit tracing"
    if torch_compat.is_fx_tracing():
        return "torch.fx symbolic tracing"
    if torch.compiler.is_exporting():
        return "torch.export"
    if torch._guards.CompileContext.try_get() is not None or torch._guards.TracingContext.try_get() is not None:
        return "torch.compile (TorchDynamo / AOTAutograd)"
    if torch._C._len_torch_dispatch_stack():
        return "a torch dispatch mode (FakeTensorMode, make_fx, a TorchDispatchMode)"
    if torch._C._functorch.peek_interpreter_stack() is not None:
        return "a torch.func transform (vmap, grad, jacrev, ...)"
    return _tracer_call_on_stack()


def _tracer_call_on_stack() -> Optional[str]:
    """The tracer entry point this thread is inside of (jit.trace also runs the code untraced
    to check its trace; make_fx and export run setup code), found by walking the caller frames."""
    codes = _tracer_codes()
    frame = sys._getframe(2)
    for _ in range(_TRACER_STACK_DEPTH):
        if frame is None:
            return None
        code = frame.f_code
        name = codes.get(code)
        if name is not None:
            return name
        if code.co_name == "compile_wrapper" and code.co_filename == _DYNAMO_EVAL_FRAME_FILE:
            return "a torch.compile()d function"  # (not torch's disable wrappers: checkpoint() has one)
        frame = frame.f_back
    return None


_TRACER_STACK_DEPTH = 200
_DYNAMO_EVAL_FRAME_FILE = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "_dynamo", "eval_frame.py")


@functools.lru_cache(maxsize=None)
def _tracer_codes() -> dict:
    """{code object: tracer name} of the tracers' entry points (first use: after torch imported them)."""
    import inspect

    import torch.export
    import torch.fx.experimental.proxy_tensor as proxy_tensor
    import torch.jit

    entries = {torch.jit.trace: "torch.jit.trace", torch.jit.trace_module: "torch.jit.trace_module",
               torch.jit.script: "torch.jit.script", torch.fx.symbolic_trace: "torch.fx.symbolic_trace",
               torch.fx.Tracer.trace: "torch.fx tracing", torch.export.export: "torch.export",
               proxy_tensor.make_fx: "make_fx", proxy_tensor._MakefxTracer.trace: "make_fx"}
    return {inspect.unwrap(fn).__code__: name for fn, name in entries.items()}


def _note_recompile(code, compile_id: str, reasons: list) -> None:
    recompiles_log.info("[%s] Recompiling %s (%s:%d) because: %s", compile_id, display_name(code),
                        code.co_filename, code.co_firstlineno, reasons[0])
    recompiles_log.debug("[%s] Guard failures of all %d cache entries of %s (newest first):\n%s",
                         compile_id, len(reasons), display_name(code), dl_log.lazy("\n".join, reasons))
    events.emit(events.RecompileEvent(display_name(code), code.co_filename, code.co_firstlineno, compile_id, reasons))


def _callers(code) -> list:
    """The Python frames that called the frame being converted, for reports (empty when nobody
    listens); generated code that tail-called its own resume function is shown once."""
    return events.caller_frames(code, cache.is_generated) if events.listening() else []


def _loop_body_at(code, index: int) -> bool:
    """Would a graph break at the FOR_ITER at ``index`` of ``code`` make its loop a native loop
    calling a loop-body function (installed into the translator, which cannot ask codegen)?"""
    try:
        flow = flow_info(code)
    except CodegenFailed:
        return False
    return loop_bodies.find_loop(code, flow, index) is not None


InstructionTranslatorBase.loop_body_at = staticmethod(_loop_body_at)


def _limit_hint(code) -> str:
    """What kept changing (automatic dynamic's memory), and how to stop the recompiles."""
    sizes = cache.frame_sizes(code, FrameSizes)
    changed = list(sizes.changed)
    if not changed:
        return ""
    constant = {name: where for name, where in sizes.made_constant.items() if name in sizes.changed}
    text = f". Inputs that kept changing: {', '.join(changed[:6])}"
    if constant:  # symbolic shapes were tried and the code itself needs the value
        text += "; the code makes " + ", ".join(f"{name} a constant at {where}" for name, where in constant.items()) \
            + " (e.g. a loop over range() unrolled in one graph, a list index, int()), so each value needs its own " \
              "graph (dynamic=True or mark_dynamic cannot change that)"
    if len(constant) < len(changed):
        text += "; if their sizes or values vary by design, mark them with dynamo_lite.mark_dynamic(tensor, dim) " \
                "or compile with dynamic=True"
    return text


def _shadow_saved_tensor_hooks() -> Optional[bool]:
    """Push identity saved-tensor hooks while a frame is traced and compiled, when the user has
    some (torch.utils.checkpoint, offloading): autograd calls only the innermost pair, and the
    fake tensors of the trace must not reach the user's.  True: pushed (pop after); False:
    nothing to shadow; None: hooks are disabled here and cannot be shadowed."""
    if torch._C._autograd._top_saved_tensors_default_hooks(True) is None:
        return False
    try:
        torch._C._autograd._push_saved_tensors_default_hooks(_same_tensor, _same_tensor)
    except RuntimeError:
        return None
    return True


def _same_tensor(t):
    return t


def _root_cells(tx, code) -> dict:
    return {name: tx.cells[name] for name in code.co_cellvars}


def _tracker_state(tx) -> str:
    """The translator's value stack (bottom to top) and bound locals, one tracker a line."""
    lines = ["  stack, bottom to top:"]
    lines += [f"    {i}: {v!r}" for i, v in enumerate(tx.stack)] or ["    (empty)"]
    lines.append("  locals:")
    lines += [f"    {name} = {v!r}" for name, v in tx.symbolic_locals.items()] or ["    (none)"]
    return "\n".join(lines)


def _code_frame(code) -> UserFrame:
    import linecache

    return UserFrame(code.co_filename, code.co_firstlineno, code.co_name,
                     linecache.getline(code.co_filename, code.co_firstlineno).strip())


_SCALAR_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None)})


def _attribute_values(v) -> list:
    """Some values of ``v``'s instance dict and slots, read as the interpreter stores them
    (object.__getattribute__: never a class's own __getattribute__ or __getattr__)."""
    values = []
    try:
        d = object.__getattribute__(v, "__dict__")
    except Exception:  # noqa: BLE001 - no instance dict (or an odd descriptor): nothing to read
        d = None
    if type(d) is dict:
        values.extend(itertools.islice(dict.values(d), 32))
    for klass in type(v).__mro__[:4]:  # __slots__ (dataclass(slots=True), ...)
        slots = klass.__dict__.get("__slots__", ())
        for slot in ([slots] if type(slots) is str else list(slots)[:16] if type(slots) in (tuple, list) else []):
            if type(slot) is str and slot not in ("__dict__", "__weakref__"):
                try:
                    values.append(object.__getattribute__(v, slot))
                except Exception:  # noqa: BLE001 - an unset slot
                    pass
    return values


def _traced_empty_before(code, owner) -> bool:
    """``code`` has compiled entries and none of them holds a graph: an earlier trace of it captured
    nothing either (see ``_compile_inner``: a second such trace makes the code SKIP)."""
    existing = cache.entries(code, owner)
    return bool(existing) and all(e.graph_module is None for e in existing)


def _nothing_to_capture(code, f_locals):
    """The answer for a frame with nothing to capture (``_has_tensor_or_module`` is False: no
    tensor or module in the arguments, no global, attribute or closure read).  When every
    argument is a plain scalar: an entry (type guards, None), so later calls with the same
    argument types run the original code without calling back (the hook costs one small guard
    program instead of a Python callback; at most cache.MAX_NOT_CAPTURED per code).  Otherwise
    RUN_EAGER: ask again next time."""
    names = bytecode_compat.arg_names(code)
    if not all(n in f_locals and type(f_locals[n]) in _SCALAR_TYPES for n in names):
        return RUN_EAGER
    if not cache.count_not_captured(code):
        return RUN_EAGER
    guards = GuardSet()
    for n in names:
        guards.add(TypeGuard(LocalSource(n), type(f_locals[n])))
    return _C.CacheEntry(guards.compile(tuple(names)).fn, None)


def _has_tensor_or_module(f_locals: dict, func, look_inside: bool = True) -> bool:
    """Is there anything to capture?  Tensors, modules or ndarrays in the arguments (two levels deep
    in lists, tuples and dicts), globals it names that are torch or numpy modules, tensors or
    modules, or closure cells holding them; with ``look_inside``, also in the attributes of an
    argument object (its instance dict and slots, read statically: no user code runs) and
    closure cells holding functions.  A frame with none of these (a config's ``__getattribute__`` called by a
    natively run ``deepcopy``) runs as it is: compiling it would only specialise it on its
    arguments until the cache limit.

    ``look_inside`` is for what the user compiled (and its resume functions and loop bodies):
    ``compile(f)(holder)`` captures ``f`` when ``holder`` holds the tensors.  Another frame
    reached natively (a callee run at a graph break) is captured only as torch.compile would:
    a helper whose arguments only hold tensors in their attributes, or a recursive closure
    (torchsde's interval tree walking its nodes), would otherwise be traced, broken and
    recompiled per node."""
    def interesting(v, depth=0):
        t = type(v)
        if issubclass(t, (torch.Tensor, torch.nn.Module, np.ndarray)):  # numpy code is traced too
            return True
        if depth < 2 and issubclass(t, (list, tuple)):
            # the base type's iteration: a subclass's own __getitem__/__iter__ is user code
            items = (tuple if issubclass(t, tuple) else list).__iter__(v)
            return any(interesting(x, depth + 1) for x in itertools.islice(items, 16))
        if depth < 2 and issubclass(t, dict):
            return any(interesting(x, depth + 1) for x in itertools.islice(dict.values(v), 16))
        if look_inside and depth < 1 and not issubclass(t, (type, str, bytes, int, float, bool, type(None))):
            return any(interesting(x, depth + 1) for x in _attribute_values(v))
        return False

    if any(interesting(v) for v in f_locals.values()):
        return True
    code = func.__code__
    # the globals it names: torch (or numpy), or a tensor/module; the cells it closes over
    glb = func.__globals__
    for name in code.co_names:
        value = glb.get(name)
        if isinstance(value, types.ModuleType):
            if value.__name__.split(".")[0] in ("torch", "numpy"):
                return True
        elif value is not None and interesting(value, 1):
            return True
    for cell in func.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:
            continue
        if interesting(contents) or (look_inside and isinstance(contents, (types.FunctionType, types.MethodType))):
            return True
    return False
