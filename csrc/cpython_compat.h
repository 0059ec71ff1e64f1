/*
 * cpython_compat.h -- every piece of CPython-version-specific knowledge the
 * dynamo_lite._C hook needs, in one place.
 *
 * This is the ONLY file that defines Py_BUILD_CORE and includes CPython's
 * internal headers. eval_frame.c talks to frames exclusively through the
 * small inline helpers below (type DLFrame, dl_frame_*), so supporting a new
 * interpreter version means adding a branch here, not touching the hook.
 *
 * Supported: CPython 3.11 (the layout of struct _PyInterpreterFrame in
 * Include/internal/pycore_frame.h). Other versions fail at compile time.
 *
 * Facts about 3.11 the hook relies on:
 *   - The eval-frame function is called with a frame that _PyEval_Vector has
 *     pushed and initialised (arguments already in localsplus[0..nargs),
 *     everything else NULL) and has not yet run: MAKE_CELL / COPY_FREE_VARS
 *     have not executed, so argument slots hold the raw argument values.
 *   - A fresh frame has prev_instr == first code unit - 1.
 *   - If the eval-frame function returns without evaluating the frame, the
 *     caller (_PyEval_Vector) still clears and pops it; no hidden helpers
 *     (_PyFrame_Clear, _PyThreadState_PopFrame: not exported) are needed.
 *   - While a non-default eval-frame function is installed, ceval does not
 *     inline Python-to-Python calls (CALL checks interp->eval_frame), so
 *     every function call reaches the hook.
 *   - interp->eval_frame may be NULL or _PyEval_EvalFrameDefault for "default".
 *
 * Tested by tests/unit/test_c_hook.py.
 */
#ifndef DYNAMO_LITE_CPYTHON_COMPAT_H
#define DYNAMO_LITE_CPYTHON_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "dynamo_lite._C supports CPython 3.11 only (see csrc/cpython_compat.h)"
#endif

/* Internal headers: only here, only with Py_BUILD_CORE, undefined again at
 * once so nothing else in the translation unit sees core-only definitions. */
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

/* The interpreter's frame type, as the hook sees it. */
typedef struct _PyInterpreterFrame DLFrame;

/* The PEP 523 eval-frame function type. */
typedef PyObject *(*dl_eval_frame_fn)(PyThreadState *, DLFrame *, int);

/* Code of the frame (borrowed; the frame holds a strong reference). */
static inline PyCodeObject *
dl_frame_code(DLFrame *frame)
{
    return frame->f_code;
}

/* Function being called (borrowed; may be NULL for frames not made from a
 * function). */
static inline PyObject *
dl_frame_func(DLFrame *frame)
{
    return (PyObject *)frame->f_func;
}

/* Globals dict of the frame (borrowed; kept alive by f_func). */
static inline PyObject *
dl_frame_globals(DLFrame *frame)
{
    return frame->f_globals;
}

/* Builtins dict of the frame (borrowed; kept alive by f_func). */
static inline PyObject *
dl_frame_builtins(DLFrame *frame)
{
    return frame->f_builtins;
}

/* Fast locals array. On a fresh frame, slots [0, nargs) hold the argument
 * values (borrowed references owned by the frame). */
static inline PyObject **
dl_frame_localsplus(DLFrame *frame)
{
    return frame->localsplus;
}

/* True if the frame has not executed any instruction yet (a new call, not a
 * resumed generator/coroutine). */
static inline int
dl_frame_is_fresh(DLFrame *frame)
{
    return frame->prev_instr == _PyCode_CODE(frame->f_code) - 1;
}

/* Tuple of names for localsplus slots (borrowed). */
static inline PyObject *
dl_code_localsplusnames(PyCodeObject *code)
{
    return code->co_localsplusnames;
}

/* Number of free variables the code expects in its function's closure. */
static inline int
dl_code_nfreevars(PyCodeObject *code)
{
    return code->co_nfreevars;
}

/* Point function fn (a PyFunctionObject) at globals, builtins and closure
 * (new references taken; closure may be NULL; the old ones are released
 * last, so finalizers they run see fn consistent). Used on a function no one
 * else holds (refcount 1, or about to be called by its only owner). 3.11
 * reads these fields at call time (_PyFunction_Vectorcall); func_version
 * (call specialisation) is reset, as CPython does when it changes them. */
static inline void
dl_function_rebind(PyObject *fn, PyObject *globals, PyObject *builtins,
                   PyObject *closure)
{
    PyFunctionObject *f = (PyFunctionObject *)fn;
    PyObject *old_globals = f->func_globals;
    PyObject *old_builtins = f->func_builtins;
    PyObject *old_closure = f->func_closure;
    Py_INCREF(globals);
    Py_INCREF(builtins);
    Py_XINCREF(closure);
    f->func_globals = globals;
    f->func_builtins = builtins;
    f->func_closure = closure;
    f->func_version = 0;
    Py_DECREF(old_globals);
    Py_DECREF(old_builtins);
    Py_XDECREF(old_closure);
}

/* Does this eval-frame function stand for "the interpreter's default"? */
static inline int
dl_eval_is_default(dl_eval_frame_fn fn)
{
    return fn == NULL || fn == _PyEval_EvalFrameDefault;
}

/* The eval-frame function currently installed for the interpreter. */
static inline dl_eval_frame_fn
dl_get_eval_frame(PyThreadState *tstate)
{
    return _PyInterpreterState_GetEvalFrameFunc(tstate->interp);
}

static inline void
dl_set_eval_frame(PyThreadState *tstate, dl_eval_frame_fn fn)
{
    _PyInterpreterState_SetEvalFrameFunc(tstate->interp, fn);
}

/* ---- for the guard evaluator (guards.c) ---------------------------------
 * LOAD_ATTR caches, per op, "instances of this type keep this attribute in
 * their __dict__": valid while the type's version tag is unchanged (3.11
 * clears and later re-assigns a fresh tag whenever the type or a base is
 * modified; tags are never reused). 0 = no valid tag. */
static inline unsigned int
dl_type_version(PyTypeObject *tp)
{
    return (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag
                                                         : 0;
}

/* The instance __dict__ of obj (borrowed), or NULL (none; no error set).
 * 3.11 may first turn inline ("managed") attribute values into a real dict,
 * as reading obj.__dict__ does. */
static inline PyObject *
dl_instance_dict(PyObject *obj)
{
    PyObject **ptr = _PyObject_GetDictPtr(obj);
    return ptr == NULL ? NULL : *ptr;
}

/* A dict's version: 3.11 gives every new dict and every mutation of a dict
 * the next value of one global 64-bit counter, so an equal version means
 * "this very dict, unchanged since". */
static inline uint64_t
dl_dict_version(PyObject *dict)
{
    return ((PyDictObject *)dict)->ma_version_tag;
}

#endif /* DYNAMO_LITE_CPYTHON_COMPAT_H */
