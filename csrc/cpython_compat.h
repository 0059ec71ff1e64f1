/*
 * cpython_compat.h -- every piece of CPython-version-specific knowledge the
 * dynamo_lite._C hook needs, in one place.
 *
 * This is the ONLY file that defines Py_BUILD_CORE and includes CPython's
 * internal headers. eval_frame.c talks to frames exclusively through the
 * small inline helpers below (type DLFrame, dl_frame_*), so supporting a new
 * interpreter version means adding a branch here, not touching the hook.
 *
 * Supported: CPython 3.11, 3.12 and 3.13 (the layouts of struct
 * _PyInterpreterFrame in Include/internal/pycore_frame.h). Other versions
 * fail at compile time.
 *
 * Facts the hook relies on, by version:
 *   - The eval-frame function is called with a frame that _PyEval_Vector has
 *     pushed and initialised (arguments already in localsplus[0..nargs),
 *     everything else NULL) and has not yet run: MAKE_CELL / COPY_FREE_VARS
 *     have not executed, so argument slots hold the raw argument values.
 *     The frame is not yet linked into the thread's frame chain (the default
 *     evaluator links it on entry), so no frame object, traceback or
 *     sys._getframe() can see it while the hook runs.
 *   - A fresh frame: prev_instr == first code unit - 1 (3.11, 3.12);
 *     instr_ptr == first code unit (3.13).
 *   - The code is f_code (3.11, 3.12) or f_executable (3.13); the function
 *     is f_func (3.11) or f_funcobj (3.12, 3.13).
 *   - Who clears and pops a frame the hook did not evaluate: in 3.11 the
 *     caller (_PyEval_Vector) does, whatever the hook did. From 3.12 on the
 *     default evaluator pops its own frame on exit and _PyEval_Vector no
 *     longer does, so a hook that runs other code in place of a frame must
 *     clear and pop it itself: dl_frame_clear_and_pop. 3.13 exports
 *     _PyEval_FrameClearAndPop; 3.12 exports no helper, so a minimal copy of
 *     its clear_thread_frame + _PyThreadState_PopFrame lives below, for a
 *     frame that never ran (no frame object, owned by the thread, on top of
 *     the data stack), behind a version tripwire.
 *   - While a non-default eval-frame function is installed, ceval does not
 *     inline Python-to-Python calls (CALL checks interp->eval_frame), so
 *     every function call reaches the hook.
 *   - interp->eval_frame may be NULL or _PyEval_EvalFrameDefault for "default".
 *   - tstate->tracing is non-zero while a sys.settrace / sys.setprofile /
 *     sys.monitoring (PEP 669, 3.12+) callback runs: frames of such
 *     callbacks are never captured.
 *
 * Tested by tests/unit/test_c_hook.py.
 */
#ifndef DYNAMO_LITE_CPYTHON_COMPAT_H
#define DYNAMO_LITE_CPYTHON_COMPAT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "dynamo_lite._C supports CPython 3.11 to 3.13 (see csrc/cpython_compat.h)"
#endif

#define DL_PY311 (PY_VERSION_HEX < 0x030C0000)
#define DL_PY312 (PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000)
#define DL_PY313 (PY_VERSION_HEX >= 0x030D0000 && PY_VERSION_HEX < 0x030E0000)

/* Internal headers: only here, only with Py_BUILD_CORE, undefined again at
 * once so nothing else in the translation unit sees core-only definitions. */
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#if DL_PY313
#include <internal/pycore_ceval.h>    /* _PyEval_FrameClearAndPop */
#include <internal/pycore_function.h> /* _PyFunction_SetVersion */
#include <internal/pycore_dict.h>     /* split dict keys and values */
#include <internal/pycore_setobject.h> /* _PySet_NextEntry (public in 3.11 and 3.12) */
#endif
#undef Py_BUILD_CORE

/* The interpreter's frame type, as the hook sees it. */
typedef struct _PyInterpreterFrame DLFrame;

/* The PEP 523 eval-frame function type. */
typedef PyObject *(*dl_eval_frame_fn)(PyThreadState *, DLFrame *, int);

/* co_extra API: renamed PyUnstable_* in 3.12 (old names deprecated). */
#if DL_PY311
#define dl_code_get_extra _PyCode_GetExtra
#define dl_code_set_extra _PyCode_SetExtra
#define dl_request_code_extra_index _PyEval_RequestCodeExtraIndex
#else
#define dl_code_get_extra PyUnstable_Code_GetExtra
#define dl_code_set_extra PyUnstable_Code_SetExtra
#define dl_request_code_extra_index PyUnstable_Eval_RequestCodeExtraIndex
#endif

/* Code of the frame (borrowed; the frame holds a strong reference). */
static inline PyCodeObject *
dl_frame_code(DLFrame *frame)
{
#if DL_PY313
    return (PyCodeObject *)frame->f_executable;
#else
    return frame->f_code;
#endif
}

/* Function being called (borrowed; may be NULL for frames not made from a
 * function). */
static inline PyObject *
dl_frame_func(DLFrame *frame)
{
#if DL_PY311
    return (PyObject *)frame->f_func;
#else
    return frame->f_funcobj;
#endif
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
#if DL_PY313
    return frame->instr_ptr == _PyCode_CODE(dl_frame_code(frame));
#else
    return frame->prev_instr == _PyCode_CODE(dl_frame_code(frame)) - 1;
#endif
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
#if DL_PY313
    if (f->func_version != 0) { /* (0 stays 0: no call specialises on fn) */
        _PyFunction_SetVersion(f, 0); /* also drops it from the version cache */
    }
#else
    f->func_version = 0;
#endif
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
#if DL_PY311
    return (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag
                                                         : 0;
#else
    /* 3.12+: a modified type's tag is set to 0 (invalid); tags come from
     * one counter and are not reused */
    return tp->tp_version_tag;
#endif
}

/* The attribute ``name`` found in the dict of a class in tp's MRO (borrowed),
 * or NULL; no error is set and no metaclass or user code runs (CPython's own
 * lookup, through its method cache). Exported unchanged in 3.11-3.13. */
static inline PyObject *
dl_type_lookup(PyTypeObject *tp, PyObject *name)
{
    return _PyType_Lookup(tp, name);
}

/* hasattr(obj, name) as CPython's builtin does it: 1 found (*result a new
 * reference), 0 not found (only an AttributeError is swallowed), -1 error.
 * _PyObject_LookupAttr in 3.11/3.12, public as PyObject_GetOptionalAttr
 * from 3.13. */
static inline int
dl_lookup_attr(PyObject *obj, PyObject *name, PyObject **result)
{
#if DL_PY313
    return PyObject_GetOptionalAttr(obj, name, result);
#else
    return _PyObject_LookupAttr(obj, name, result);
#endif
}

/* Does this dict's version change whenever its contents change?  3.11 and
 * 3.12: always.  3.13 keeps the attributes of most instances in "inline
 * values" that a materialised __dict__ shares (a split dict: ma_values points
 * at them), and a store through the object (obj.a = 2) writes those values
 * without a new dict version: such a version cannot tell "unchanged since". */
static inline int
dl_dict_version_follows_contents(PyObject *dict)
{
#if DL_PY313
    return ((PyDictObject *)dict)->ma_values == NULL;
#else
    (void)dict;
    return 1;
#endif
}

/* Slots of a split dict (3.13, with the GIL): a dict whose ma_values is
 * not NULL keeps its keys in a shared keys table that only grows (a key's
 * entry index never changes and entries are never removed) and the value of
 * the key at entry ix in ma_values->values[ix] (NULL: absent), which is where
 * PyDict_GetItem reads it after hashing. Where the version does not follow
 * the contents (dl_dict_version_follows_contents), a remembered index gives
 * the value without hashing: exact, since the entry's key is compared (by
 * identity, and a caller holds a reference to it, so its address is not
 * reused) each time. Elsewhere DL_HAVE_DICT_SLOTS is 0. */
#if DL_PY313 && !defined(Py_GIL_DISABLED)
#define DL_HAVE_DICT_SLOTS 1

/* The entry index of key (equal str) in split dict `dict`, or -1; *found
 * gets the table's own key object (borrowed). No user code runs. */
static inline Py_ssize_t
dl_dict_slot_find(PyObject *dict, PyObject *key, PyObject **found)
{
    PyDictObject *mp = (PyDictObject *)dict;
    if (mp->ma_values == NULL || !PyUnicode_CheckExact(key)) {
        return -1;
    }
    PyDictKeysObject *keys = mp->ma_keys;
    PyDictUnicodeEntry *entries = DK_UNICODE_ENTRIES(keys);
    Py_ssize_t n = keys->dk_nentries;
    for (Py_ssize_t ix = 0; ix < n; ix++) {
        PyObject *k = entries[ix].me_key;
        if (k == key || (k != NULL && PyUnicode_CheckExact(k) &&
                         PyUnicode_Compare(k, key) == 0)) {
            *found = k;
            return ix;
        }
    }
    return -1;
}

/* 1 and *value (borrowed; NULL when the key is absent) if `dict` is split
 * and entry ix of its keys holds exactly `key`; 0 otherwise. */
static inline int
dl_dict_slot_value(PyObject *dict, Py_ssize_t ix, PyObject *key,
                   PyObject **value)
{
    PyDictObject *mp = (PyDictObject *)dict;
    PyDictValues *values = mp->ma_values;
    if (values == NULL) {
        return 0;
    }
    PyDictKeysObject *keys = mp->ma_keys;
    if (ix >= keys->dk_nentries || ix >= values->capacity ||
        DK_UNICODE_ENTRIES(keys)[ix].me_key != key) {
        return 0;
    }
    *value = values->values[ix];
    return 1;
}
#else
#define DL_HAVE_DICT_SLOTS 0
#endif

/* The instance __dict__ of obj (borrowed), or NULL (none; no error set).
 * 3.11 may first turn inline ("managed") attribute values into a real dict,
 * as reading obj.__dict__ does. */
static inline PyObject *
dl_instance_dict(PyObject *obj)
{
    PyObject **ptr = _PyObject_GetDictPtr(obj);
    return ptr == NULL ? NULL : *ptr;
}

/* A dict's version: 3.11 to 3.13 give every new dict and every mutation of
 * a dict the next value of one interpreter-wide 64-bit counter (3.12 and 3.13
 * keep watcher bits in the low bits and step the counter above them), so an
 * equal version means "this very dict, unchanged since". The field is
 * deprecated from 3.12 (removed in 3.14, which we do not support) but still
 * exact on these versions. */
static inline uint64_t
dl_dict_version(PyObject *dict)
{
#if !DL_PY311
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    return ((PyDictObject *)dict)->ma_version_tag;
#if !DL_PY311
#pragma GCC diagnostic pop
#endif
}

/* Is a trace, profile or sys.monitoring callback running on this thread?
 * (CPython raises tstate->tracing around each of them, 3.11 to 3.13.) */
static inline int
dl_tstate_is_tracing(PyThreadState *tstate)
{
    return tstate->tracing != 0;
}

/* ---- frames the hook ran other code in place of ---------------------------
 * dl_frame_clear_and_pop(tstate, frame): release what `frame` holds and pop
 * it off the thread's data stack, as the default evaluator does with a frame
 * it has finished. `frame` is a fresh frame handed to the hook, never
 * evaluated: owned by the thread, on top of the data stack (everything the
 * hook ran on top of it has been popped again), not linked into the frame
 * chain and so without a frame object. 3.11: nothing to do (the caller,
 * _PyEval_Vector, clears and pops it). */
#if DL_PY311

static inline void
dl_frame_clear_and_pop(PyThreadState *tstate, DLFrame *frame)
{
    (void)tstate;
    (void)frame;
}

#elif DL_PY312

/* Tripwire: the copy below follows CPython 3.12's Python/ceval.c
 * clear_thread_frame, Python/frame.c _PyFrame_ClearExceptCode (the part for
 * a frame without a frame object) and Python/pystate.c
 * _PyThreadState_PopFrame. A 3.12 point release that changed the frame or
 * the data stack would have to change these fields; check them at build. */
_Static_assert(offsetof(struct _PyInterpreterFrame, f_code) == 0,
               "3.12 frame layout changed: review dl_frame_clear_and_pop");
_Static_assert(sizeof(((_PyStackChunk *)0)->top) == sizeof(size_t),
               "3.12 data stack layout changed: review dl_frame_clear_and_pop");

static inline void
dl_frame_clear_and_pop(PyThreadState *tstate, DLFrame *frame)
{
    assert(frame->owner == FRAME_OWNED_BY_THREAD);
    assert(frame->frame_obj == NULL);
    assert((PyObject **)frame + frame->f_code->co_framesize ==
           tstate->datastack_top);
    /* clear (finalizers may run: the frame is still on the stack, below
     * anything they push) */
    tstate->c_recursion_remaining--;
    for (int i = 0; i < frame->stacktop; i++) {
        Py_XDECREF(frame->localsplus[i]);
    }
    Py_XDECREF(frame->frame_obj);
    Py_XDECREF(frame->f_locals);
    Py_DECREF(frame->f_funcobj);
    Py_DECREF(frame->f_code);
    tstate->c_recursion_remaining++;
    /* pop */
    PyObject **base = (PyObject **)frame;
    _PyStackChunk *chunk = tstate->datastack_chunk;
    if (base == &chunk->data[0]) {
        /* the frame opened this chunk: free it and go back to the previous
         * one (the root chunk is never popped this way) */
        _PyStackChunk *previous = chunk->previous;
        assert(previous != NULL);
        tstate->datastack_top = &previous->data[previous->top];
        tstate->datastack_chunk = previous;
        tstate->datastack_limit =
            (PyObject **)(((char *)previous) + previous->size);
        PyObjectArenaAllocator alloc;
        PyObject_GetArenaAllocator(&alloc);
        alloc.free(alloc.ctx, chunk, chunk->size);
    }
    else {
        assert(tstate->datastack_top >= base);
        tstate->datastack_top = base;
    }
}

#else /* 3.13 */

static inline void
dl_frame_clear_and_pop(PyThreadState *tstate, DLFrame *frame)
{
    _PyEval_FrameClearAndPop(tstate, frame);
}

#endif

/* The next element of a set or frozenset's table (a borrowed reference; no user code runs):
 * 1 and *key, or 0 at the end. */
static inline int
dl_set_next(PyObject *set, Py_ssize_t *pos, PyObject **key)
{
    Py_hash_t hash;
    return _PySet_NextEntry(set, pos, key, &hash);
}

/* The object weak reference `ref` points to (a new reference), or NULL with
 * no error when it has died. PyWeakref_GetRef is new in 3.13, where
 * PyWeakref_GET_OBJECT is deprecated. */
static inline PyObject *
dl_weakref_target(PyObject *ref)
{
#if DL_PY313
    PyObject *target = NULL;
    if (PyWeakref_GetRef(ref, &target) <= 0) {
        PyErr_Clear();
        return NULL;
    }
    return target;
#else
    PyObject *target = PyWeakref_GET_OBJECT(ref);
    return target == Py_None ? NULL : Py_NewRef(target);
#endif
}

/* The error being raised (NULL: none), taken out so other code can run, and
 * put back (3.12 replaced the fetch/restore triple by one object). */
#if DL_PY311
typedef struct {
    PyObject *type, *value, *traceback;
} DLSavedError;

static inline DLSavedError
dl_error_save(void)
{
    DLSavedError e;
    PyErr_Fetch(&e.type, &e.value, &e.traceback);
    return e;
}

static inline void
dl_error_restore(DLSavedError e)
{
    PyErr_Restore(e.type, e.value, e.traceback);
}
#else
typedef PyObject *DLSavedError;

static inline DLSavedError
dl_error_save(void)
{
    return PyErr_GetRaisedException();
}

static inline void
dl_error_restore(DLSavedError e)
{
    PyErr_SetRaisedException(e);
}
#endif

#endif /* DYNAMO_LITE_CPYTHON_COMPAT_H */
