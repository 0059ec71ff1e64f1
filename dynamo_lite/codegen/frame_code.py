"""The code that replaces a compiled frame.

Full capture (the trace reached RETURN_VALUE)::

    <prologue: COPY_FREE_VARS / MAKE_CELL as in the original; RESUME>
    <prologue calls: torch.manual_seed(n) reached before any graph work>
    ___graph_out = compiled_graph(<graph inputs loaded from their sources>)
    <replay side effects>  <restore cell contents>
    return <rebuilt return value>

Graph break before instruction k::

    <prologue> ___graph_out = compiled_graph(...)  <replay side effects>
    <store every live local>  <push the value stack>  jump to k
    <a copy of the original code>   # k runs natively, with its exception table
    ...after k: either a stub that calls __resume_at_<next>(stack..., locals...)
       and returns its result, or (inside loops) the loop calls its loop-body function
       each iteration (loop_bodies.py) and where it exits a stub calls a resume function
       at the exit, or the original code just goes on

Both are made with the `bytecode` package from the original code object;
the new code takes all of the frame's arguments positionally (the calling
convention of csrc/eval_frame.c).
Tested by tests/unit/test_codegen_roundtrip.py and tests/breaks/test_graph_breaks.py.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Callable, Optional

import torch
from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd

from .. import bytecode_compat
from ..exc import BackendCompilerFailed
from .. import cache, runtime
from ..source import RANDOM_DRAWS, AttrSource, ItemSource, LocalSource, Source
from ..variables.base import NullVariable, VariableTracker
from .pycodegen import GRAPH_OUT, CodegenFailed, PyCodegen, assemble, original_instructions, original_items
from .liveness import flow_info
from . import loop_bodies, resume as resume_mod


@dataclasses.dataclass
class FrameState:
    """What the trace left behind, to be rebuilt by generated code."""

    code: types.CodeType
    side_effects: object
    root_cells: dict  # name -> CellVariable of the root frame's cellvars
    frame_locals: dict  # name -> tracker of each bound local of the frame
    stack: list  # value stack at the break (empty for a full capture)
    return_value: Optional[VariableTracker]  # set for a full capture
    break_index: Optional[int] = None  # the breaking instruction: index into bytecode_compat.instructions(code),
    # which is also its number in liveness.FlowInfo (checked there)
    grad_mode: Optional[bool] = None  # grad mode the code must leave set (None: unchanged)
    # (function, constant args) called before the graph (OutputGraph.prologue_calls)
    prologue_calls: list = dataclasses.field(default_factory=list)
    # trackers whose sources are loaded right after the graph call, before anything is
    # stored (set by collect_graph_outputs; see PyCodegen.preload_sources)
    preload: list = dataclasses.field(default_factory=list)
    # calls of Python's random module made before the graph (OutputGraph.random_calls)
    random_calls: list = dataclasses.field(default_factory=list)
    # sources of the frame inputs those calls read when they run (runtime.InputRef)
    random_inputs: list = dataclasses.field(default_factory=list)
    # id(twin) -> (twin, Source): objects those calls make anew (OutputGraph.made_before_graph)
    made_before_graph: dict = dataclasses.field(default_factory=dict)


def emit_body(cg: PyCodegen, state: FrameState) -> None:
    """Everything after the graph call (shared by both passes)."""
    cg.side_effects = state.side_effects
    cg.constant_sources = state.made_before_graph
    if state.preload:
        cg.preload_sources(state.preload)
    state.side_effects.codegen(cg)
    if state.return_value is not None:
        # the frame ends: its cells matter only to functions rebuilt here, which hold them
        cg.reconstruct(state.return_value)
        stored: set = set()
        while True:
            needed = [name for name in state.root_cells if name in cg.closure_loads and name not in stored
                      and state.root_cells[name].contents is not None]
            if not needed:
                break
            for name in needed:  # (rebuilding a cell's contents may need more cells)
                stored.add(name)
                cg.reconstruct(state.root_cells[name].contents)
                cg.store_deref(name)
        _set_grad_mode(cg, state)
        cg.emit("RETURN_VALUE")
        return
    for name, cell in state.root_cells.items():
        if cell.contents is not None:
            cg.reconstruct(cell.contents)
            cg.store_deref(name)
    for name, var in state.frame_locals.items():
        if var.source == LocalSource(name) and not getattr(var, "mutable_local", False):
            continue  # still the argument the frame was called with
        cg.reconstruct(var)
        cg.store_fast(name)
    for name in bytecode_compat.arg_names(state.code):
        if name not in state.frame_locals and name not in state.code.co_cellvars and \
                not name.startswith(resume_mod.STACK_PREFIX):
            cg.emit("DELETE_FAST", name)  # deleted by the trace: the frame lets go of the argument, as eager did
    for var in state.stack:
        cg.reconstruct(var)
    _set_grad_mode(cg, state)


def _set_grad_mode(cg: PyCodegen, state: FrameState) -> None:
    """The graph leaves grad mode as it found it; set the mode the frame ends in."""
    if state.grad_mode is not None:
        cg.load_callable(torch._C._set_grad_enabled)
        cg.load_const(state.grad_mode)
        cg.call(1)
        cg.emit("POP_TOP")


def collect_graph_outputs(state: FrameState) -> list:
    """First pass: which graph nodes the generated code needs."""
    cg = PyCodegen(state.code, collecting=True)
    emit_body(cg, state)
    state.preload = _sources_to_preload(cg, state)
    return cg.graph_outputs


def _sources_to_preload(cg: PyCodegen, state: FrameState) -> list:
    """Sourced values the body rebuilds after a store that may overwrite their source."""
    if not cg.source_loads:
        return []
    if not state.side_effects.is_empty() or any(c.contents is not None for c in state.root_cells.values()):
        return list(cg.source_loads.values())
    if state.return_value is not None:
        return []
    # only locals are stored: values read from a local that gets reassigned
    stored = {name for name, var in state.frame_locals.items()
              if not (var.source == LocalSource(name) and not getattr(var, "mutable_local", False))}
    return [v for v in cg.source_loads.values()
            if isinstance(v.source.base(), LocalSource) and v.source.base().local_name in stored]


def _original_prologue(code: types.CodeType) -> list:
    out = []
    try:
        items = original_items(code)
    except CodegenFailed:  # (an exception table the items do not map onto: only the prologue is needed)
        items = Bytecode.from_code(code)
    for inst in items:
        if isinstance(inst, Instr) and bytecode_compat.ends_prologue(inst):
            out.extend(bytecode_compat.frame_prologue(lineno=code.co_firstlineno))
            break
        if isinstance(inst, Instr) and (bytecode_compat.is_prologue(inst) or inst.name == "NOP"):
            out.append(Instr(inst.name, inst.arg, lineno=code.co_firstlineno))
        elif isinstance(inst, Instr):
            break
    return out


def _graph_call(cg: PyCodegen, compiled, graph_inputs) -> None:
    cg.load_callable(compiled)
    shared = _shared_prefixes([gi.source for gi in graph_inputs])
    temps: dict = {}
    for gi in graph_inputs:
        _load_graph_input(cg, gi.source, shared, temps)
    cg.call(len(graph_inputs))
    cg.store_fast(GRAPH_OUT)


# Graph inputs of a module share long source prefixes (``self._modules['layers']
# ._modules['3']._parameters['weight']`` and ``[...]['bias']``); each shared
# attribute/item prefix is loaded once into a temporary local (performance only:
# the values are the same plain attribute and item reads).
_STEP_SOURCES = (AttrSource, ItemSource)  # reconstruct() = parent, then one step


class _OnStack(Source):
    """A parent whose value is already on the stack."""

    def name(self):
        return "<on stack>"

    def reconstruct(self, cg):
        pass


_ON_STACK = _OnStack()


def _shared_prefixes(sources) -> set:
    """Step sources that are read more than once: inputs or parents of >= 2 distinct steps."""
    uses: dict = {src: 1 for src in sources}
    children: dict = {}
    for src in sources:
        while type(src) in _STEP_SOURCES:
            children.setdefault(src.parent, set()).add(src)
            src = src.parent
    for parent, kids in children.items():
        uses[parent] = uses.get(parent, 0) + len(kids)
    return {s for s, n in uses.items() if n > 1 and type(s) in _STEP_SOURCES}


def _load_graph_input(cg: PyCodegen, source, shared: set, temps: dict) -> None:
    if source in temps:
        cg.emit("LOAD_FAST", temps[source])
        return
    ancestor = source.parent if type(source) in _STEP_SOURCES else None
    while ancestor is not None and ancestor not in shared:
        ancestor = ancestor.parent if type(ancestor) in _STEP_SOURCES else None
    if ancestor is not None:
        _load_graph_input(cg, source.parent, shared, temps)
        dataclasses.replace(source, parent=_ON_STACK).reconstruct(cg)
    else:
        source.reconstruct(cg)
    if source in shared:
        temps[source] = cg.new_temp()
        cg.emit("COPY", 1)
        cg.emit("STORE_FAST", temps[source])


def _finish(code: types.CodeType, instrs: list, n_generated: int) -> types.CodeType:
    bc = Bytecode(instrs)
    bc.name = code.co_name
    bc.qualname = code.co_qualname
    bc.filename = code.co_filename
    bc.first_lineno = code.co_firstlineno
    bc.argnames = list(bytecode_compat.arg_names(code))
    bc.argcount = len(bc.argnames)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.flags = code.co_flags & ~(bytecode_compat.CO_VARARGS | bytecode_compat.CO_VARKEYWORDS)
    bc.cellvars = list(code.co_cellvars)
    bc.freevars = list(code.co_freevars)
    try:
        return assemble(bc, code, n_generated)
    except Exception as e:  # noqa: BLE001 - a codegen bug: fall back to eager
        raise CodegenFailed(f"assembling transformed code failed: {type(e).__name__}: {e}") from e


def build_code(state: FrameState, compiled, graph_inputs, output_index: dict,
               resume_maker: Optional[Callable] = None, rerun_on_error: bool = False,
               grad_enabled: bool = True) -> types.CodeType:
    """Second pass: the transformed code object.

    The graph call is protected: if the graph raises, grad mode is set back to
    ``grad_enabled`` (the mode the frame was entered with; the graph may have
    changed it) and then, when ``rerun_on_error`` (a partial run of the graph
    left nothing behind, OutputGraph.can_rerun_on_error), the frame's original
    bytecode runs from the start, so the error is raised by the user's own line,
    inside the user's try/with blocks, after the side effects that precede it;
    otherwise the error propagates from the graph call.
    """
    code = state.code
    cg = PyCodegen(code, collecting=False, output_index=output_index)
    cg.lineno = code.co_firstlineno
    cg.instrs.extend(_original_prologue(code))
    for fn, args in state.prologue_calls:
        cg.load_callable(fn)
        for a in args:
            cg.load_const(a)
        cg.call(len(args))
        cg.emit("POP_TOP")
    if state.random_calls:  # drawn first, in trace order: the graph and rebuilt values read them
        cg.load_callable(runtime.random_draws)
        cg.load_const(tuple(state.random_calls))
        for source in state.random_inputs:
            source.reconstruct(cg)
        cg.emit("BUILD_TUPLE", len(state.random_inputs))
        cg.call(2)
        cg.emit("STORE_FAST", RANDOM_DRAWS)
    handler, rerun_label = None, Label()
    if compiled is not None:
        handler = Label()
        try_begin = TryBegin(handler, push_lasti=False, stack_depth=0)
        cg.instrs.append(try_begin)
        _graph_call(cg, compiled, graph_inputs)
        cg.instrs.append(TryEnd(try_begin))
    emit_body(cg, state)
    if state.return_value is not None:
        instrs = cg.instrs
        rerun_copy = None
        if handler is not None and rerun_on_error:
            rerun_copy = _inert_prologue(code, original_instructions(code))
    else:
        instrs = cg.instrs + _continue_at_break(cg, state, rerun_label)
        rerun_copy = None
    if handler is not None:
        instrs = instrs + _graph_error_handler(code, handler, rerun_label, rerun_on_error, grad_enabled,
                                               rerun_copy, bool(state.random_calls))
    return _finish(code, instrs, len(instrs))


def _graph_error_handler(code, handler: Label, rerun_label: Label, rerun: bool, grad_enabled: bool,
                         rerun_copy: Optional[list], undo_draws: bool = False) -> list:
    """The handler of the graph call: [exc] -> restore grad mode -> rerun the original or re-raise
    (``undo_draws``: before a rerun, the random module is put back as it was before the draws made
    ahead of the graph, so the original code draws the same numbers again)."""
    cg = PyCodegen(code, collecting=False)
    cg.lineno = code.co_firstlineno
    cg.label(handler)
    cg.load_callable(torch._C._set_grad_enabled)
    cg.load_const(grad_enabled)
    cg.call(1)
    cg.emit("POP_TOP")
    if not rerun:
        cg.emit("RERAISE", 0)
        return cg.instrs
    reraise = Label()
    cg.load_callable(_rerun_after)
    cg.emit("COPY", 3)
    cg.call(1)
    cg.jump_if(False, reraise)
    cg.emit("POP_TOP")  # the exception: the original code raises it again, where eager does
    if undo_draws:
        cg.load_callable(runtime.undo_random_draws)
        cg.emit("LOAD_FAST", RANDOM_DRAWS)
        cg.call(1)
        cg.emit("POP_TOP")
    if rerun_copy is not None:  # full capture: the original code follows the handler
        cg.instrs.extend(rerun_copy)
    else:
        cg.jump(rerun_label, backward=True)  # the copy's start
    cg.label(reraise)
    cg.emit("RERAISE", 0)
    return cg.instrs


def _rerun_after(exc: BaseException) -> bool:
    """Does the original code run again after the graph raised ``exc``?  Not for
    KeyboardInterrupt and the like, nor for a backend's failure (the user must see it), nor
    while saved-tensor hooks are installed: the graph's ops called them (user Python: offloading,
    counters, checkpoint's bookkeeping, whose early stop of a recomputation is an exception raised
    from its pack hook), and the rerun would call them again."""
    return isinstance(exc, Exception) and not isinstance(exc, BackendCompilerFailed) and \
        torch._C._autograd._top_saved_tensors_default_hooks(False) is None


def _inert_prologue(code: types.CodeType, copy: list) -> list:
    """A copy of the original instructions whose prologue (run already) does nothing."""
    for p, x in enumerate(copy):
        if not isinstance(x, Instr):
            continue
        if bytecode_compat.ends_prologue(x):
            copy[p] = Instr("NOP", lineno=code.co_firstlineno)
            break
        if bytecode_compat.is_prologue(x):
            copy[p] = Instr("NOP", lineno=x.lineno if x.lineno else code.co_firstlineno)
    return copy


def _resume_after_loop(copy: list, exits: dict, state: FrameState, flow, info, line: int) -> list:
    """Stubs that continue the frame in a resume function where the loop around the break
    leaves to (``exits``: instruction number -> that instruction in ``copy``): every path to such
    an instruction jumps to its stub first.  Where the code after the loop is inside another loop
    (each of its iterations would nest one more frame) or just returns, it runs natively; so it
    does in a loop body function (and its resume functions), which runs once per iteration of the
    outer loop: the rest of that iteration, whose values (a list the loop appends to) change
    every time, would recompile at each."""
    code = state.code
    stubs: list = []
    if cache.in_loop_body(code):
        return stubs
    for x, instr in exits.items():
        if instr.name in bytecode_compat.RETURNS or resume_mod.in_loop(flow, x) \
                or flow.depth[x] is None or flow.depth[x] > len(state.stack):
            continue
        nulls = tuple(isinstance(v, NullVariable) for v in state.stack[:flow.depth[x]])
        # what the loop assigns and the rest reads is handed over as it is (unbound after no iteration)
        assigned = tuple(sorted(set(info.writes) & flow.live_in[x]))
        succ = resume_mod.Successor(x, True, nulls, assigned=assigned)
        stubs.extend(_resume_stub(state, succ, instr.lineno or line))
        at = next(i for i, y in enumerate(copy) if y is instr)
        copy[at:at] = bytecode_compat.jump(succ.label, lineno=instr.lineno or line)
    return stubs


def _resume_stub(state: FrameState, succ, line: int) -> list:
    """The instructions, under a new label (``succ.label``), that continue the frame in the
    resume function at ``succ`` and return its result."""
    stub = PyCodegen(state.code, collecting=False)
    stub.lineno = line
    succ.label = Label()
    stub.label(succ.label)
    resume_mod.emit_resume_call(stub, state.code, succ, state)
    return stub.instrs


def _work_after(flow, k: int, last: int) -> bool:
    """Instructions k+1..last do more than move values (an iteration's rest after a break)."""
    return any(x.name not in bytecode_compat.VALUE_MOVES for x in flow.instrs[k + 1:last + 1])


def iteration_start(code: types.CodeType, k: int, step_ips: list, step: int,
                    iteration_locals: dict) -> Optional[int]:
    """For a break at instruction ``k`` (root step ``step``) inside a loop that the generated code
    runs through its loop-body function: the root step at which the iteration around the break
    began (its FOR_ITER, or a while loop's first body instruction), or None.  The graph then ends
    there, and every iteration, the current one included, runs through the body function and its
    resume functions: one capture of the loop body serves them all, where the rest of the current
    iteration would otherwise run natively and capture each function it calls as a frame of its own
    (a second graph of the same code: wav2vec2's encoder layers after its LayerDrop branch).
    Only where that iteration starts as later ones will (``iteration_locals``: the locals bound
    then): every local the body reads is bound and no two are one object; and not for the last
    iteration of a loop over known items, nor one whose item is 0 or 1 (the translator counts
    those as no iteration left).  A first iteration that starts otherwise (``prev = curr = t0``, a
    local the body assigns later) would compile the body once for itself and again for the rest
    (torchsde's integration loops)."""
    flow = flow_info(code)
    kk = bytecode_compat.fused_truth_test([x.name for x in flow.instrs], k)
    if flow.instrs[kk].name in resume_mod.NO_SUCCESSOR or kk in flow.comprehensions or not resume_mod.in_loop(flow, kk):
        return None
    info = loop_bodies.find_loop(code, flow, k)
    if info is None or k == info.header or not _work_after(flow, kk, info.last):
        return None  # (nothing but moving values after the break: the graph keeps the iteration)
    body = loop_bodies.make_body_code(code, flow, info)
    if loop_bodies.rewrite_parent_copy(original_instructions(code), code, flow, info, body) is None:
        return None  # (the frame runs natively after the break: the graph keeps what it can)
    begun = next((s for s in range(min(step, len(step_ips)) - 1, -1, -1) if step_ips[s] == info.header), None)
    bound, left = iteration_locals.get(begun, (None, None))
    if bound is None or not set(info.reads) <= set(bound):
        return None  # (a local the body reads is not bound yet at this iteration)
    if left is not None and left < 2:
        return None  # (the last iteration, or one the body would be compiled for alone)
    objects = [bound[name] for name in info.reads if bound[name] is not None]
    return begun if len(set(objects)) == len(objects) else None


def _continue_at_break(cg: PyCodegen, state: FrameState, rerun_label: Label) -> list:
    """Jump into a copy of the original code at the break, with stubs after it."""
    code = state.code
    flow = flow_info(code)  # checks that break_index means the same instruction here
    k = state.break_index
    start = k
    while start > 0 and flow.instrs[start - 1].name in bytecode_compat.CALL_PREFIX and \
            flow.instrs[k].name == "CALL":
        start -= 1
    copy = original_instructions(code)
    positions = [i for i, x in enumerate(copy) if isinstance(x, Instr)]
    # the copy's own prologue is unreachable (or, on a rerun after a graph error, already done)
    copy = _inert_prologue(code, copy)
    entry = Label()
    copy.insert(positions[start], entry)
    copy.insert(0, rerun_label)
    positions = [i for i, x in enumerate(copy) if isinstance(x, Instr)]
    # the generated code's temporaries are not the frame's locals (locals(), tracebacks): drop them
    # (and the graph's outputs: a tuple of them would keep every output tensor alive until the
    # frame returns, long after the user's code dropped it)
    temps = sorted({x.arg for x in cg.instrs if isinstance(x, Instr) and x.name == "STORE_FAST"
                    and isinstance(x.arg, str) and (x.arg.startswith(cg.temp_prefix) or x.arg == GRAPH_OUT)})
    # a resume function's saved-stack arguments are dead past its prologue (which deletes them)
    temps += [n for n in bytecode_compat.arg_names(code) if n.startswith(resume_mod.STACK_PREFIX)]
    jump_in = [Instr("DELETE_FAST", name, lineno=cg.lineno) for name in temps]
    jump_in.extend(bytecode_compat.before_entry(flow.instrs[start].name, lineno=cg.lineno))
    jump_in.extend(bytecode_compat.jump(entry, lineno=cg.lineno))
    plan = resume_mod.plan_successors(flow, k, state.stack)
    if plan is None:
        info = loop_bodies.find_loop(code, flow, k)
        if info is not None:
            body = loop_bodies.make_body_code(code, flow, info)
            exits = {x: copy[positions[x]] for x in loop_bodies.exit_targets(flow, info)}
            rewritten = loop_bodies.rewrite_parent_copy(copy, code, flow, info, body)
            if rewritten is not None:
                # the loop goes on natively, calling its body function; after it, the frame
                # continues in a resume function (captured again)
                stubs = _resume_after_loop(rewritten, exits, state, flow, info, cg.lineno)  # (edits rewritten)
                return jump_in + rewritten + stubs
        return jump_in + copy  # the rest of the frame runs natively
    stubs: list = []
    inst_pos = positions[bytecode_compat.fused_truth_test([x.name for x in flow.instrs], k)]
    k_inst = copy[inst_pos]
    # a line for every instruction made here, even after an artificial one (no line: cleanup code)
    k_line = k_inst.lineno or cg.lineno
    for succ in plan:
        stubs.extend(_resume_stub(state, succ, k_line))
    jump_succ = next((s for s in plan if s.is_jump_target), None)
    fall_succ = next((s for s in plan if not s.is_jump_target), None)
    if jump_succ is not None:
        copy[inst_pos] = bytecode_compat.redirect_jump(k_inst, jump_succ.label, lineno=k_line)
    if fall_succ is not None:
        after_pos = inst_pos if fall_succ.after is None else positions[fall_succ.after]
        copy[after_pos + 1:after_pos + 1] = bytecode_compat.jump(fall_succ.label, lineno=k_line)
    return jump_in + copy + stubs


__all__ = ["FrameState", "collect_graph_outputs", "build_code", "iteration_start"]
