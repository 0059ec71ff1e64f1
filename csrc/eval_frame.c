/*
 * eval_frame.c -- the PEP 523 hook of dynamo_lite, built as dynamo_lite._C.
 *
 * Role in the pipeline: C does only what Python cannot.
 *   - hold a per-thread callback (None = hook inactive for this thread);
 *   - install our eval-frame function interpreter-wide, chaining to whatever
 *     other PEP 523 user (e.g. torch.compile) was installed before us;
 *   - filter frames (fresh calls of plain functions only);
 *   - keep the per-code cache in co_extra: NULL, SKIP, or a list of
 *     (check_fn, code_or_None[, owner]) entries, most recently hit first (an
 *     entry whose check_fn is ALWAYS matches everything and stays last; an
 *     entry with an owner is only used while the owner is the callback);
 *   - run guards, and run the chosen code in place of the original frame.
 * Everything else (what to compile, guards, codegen) is Python.
 *
 * Invariants:
 *   - tls_callback is a strong reference or NULL; it is NULL (hook off for
 *     the thread) while the callback, a check_fn, or a DisabledCall runs, and
 *     is restored afterwards on every path. Anything set with set_callback()
 *     during such a call is scoped to it and dropped on restore.
 *   - co_extra holds a strong reference (released by cache_free) or NULL.
 *   - When we do not handle a frame we call prev_eval if set, else
 *     _PyEval_EvalFrameDefault; prev_eval is never our own function.
 *   - Frames we handle by running other code are returned from without being
 *     evaluated; _PyEval_Vector clears and pops them.
 *   - All interpreter-version knowledge lives in cpython_compat.h.
 *
 * Tested by tests/test_c_hook.py.
 */
#include "cpython_compat.h"
#include "guards.h"

#include <string.h>

/* Size of the on-stack argument buffer for guard calls; bigger calls use the
 * heap. */
#define DL_SMALL_ARGS 16

/* ------------------------------------------------------------------------ */
/* Global and per-thread state                                              */
/* ------------------------------------------------------------------------ */

/* co_extra slot owned by this module (from _PyEval_RequestCodeExtraIndex). */
static Py_ssize_t cache_index = -1;

/* The SKIP sentinel (strong reference owned by the module, never freed). */
static PyObject *skip_sentinel = NULL;

/* The ALWAYS check (strong reference owned by the module, never freed): an
 * entry (ALWAYS, code) matches every call without running anything; it is
 * kept last in its list (added at the end, never moved to the front), so it
 * is the fallback once no other entry matches. */
static PyObject *always_sentinel = NULL;

/* Eval-frame function that was installed before ours (NULL = default). */
static dl_eval_frame_fn prev_eval = NULL;

/* This thread's callback: strong reference, or NULL when inactive. */
static _Thread_local PyObject *tls_callback = NULL;

/* Frame currently being handed to prev_eval by this thread; if prev_eval
 * hands the very same frame back to us (it chained to us), we run it with
 * the default evaluator instead of looping. */
static _Thread_local DLFrame *tls_delegating = NULL;

static PyObject *dl_eval_frame(PyThreadState *tstate, DLFrame *frame,
                               int throwflag);

/* Take this thread's callback out (hook off); returns the owned reference. */
static inline PyObject *
callback_suspend(void)
{
    PyObject *cb = tls_callback;
    tls_callback = NULL;
    return cb;
}

/* Put back a callback taken by callback_suspend, dropping anything that was
 * set in between. */
static inline void
callback_resume(PyObject *cb)
{
    PyObject *inner = tls_callback;
    tls_callback = cb;
    Py_XDECREF(inner);
}

/* Make ours the interpreter's eval-frame function (cheap if it already is). */
static inline void
ensure_installed(PyThreadState *tstate)
{
    dl_eval_frame_fn cur = dl_get_eval_frame(tstate);
    if (cur != dl_eval_frame) {
        prev_eval = dl_eval_is_default(cur) ? NULL : cur;
        dl_set_eval_frame(tstate, dl_eval_frame);
    }
}

/* Run the frame the way it would have run without us. */
static inline PyObject *
delegate(PyThreadState *tstate, DLFrame *frame, int throwflag)
{
    dl_eval_frame_fn prev = prev_eval;
    if (prev == NULL || tls_delegating == frame) {
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    DLFrame *saved = tls_delegating;
    tls_delegating = frame;
    PyObject *result = prev(tstate, frame, throwflag);
    tls_delegating = saved;
    return result;
}

/* ------------------------------------------------------------------------ */
/* co_extra cache                                                           */
/* ------------------------------------------------------------------------ */

static void
cache_free(void *extra)
{
    Py_XDECREF((PyObject *)extra);
}

/* Borrowed reference to what co_extra holds, or NULL. */
static inline PyObject *
cache_get(PyCodeObject *code)
{
    void *extra = NULL;
    if (_PyCode_GetExtra((PyObject *)code, cache_index, &extra) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return (PyObject *)extra;
}

/* Store obj (new reference taken; NULL clears). The old value is released
 * by _PyCode_SetExtra through cache_free. */
static int
cache_set(PyCodeObject *code, PyObject *obj)
{
    Py_XINCREF(obj);
    if (_PyCode_SetExtra((PyObject *)code, cache_index, obj) < 0) {
        Py_XDECREF(obj);
        return -1;
    }
    return 0;
}

/* A well-formed cache entry: (callable check_fn, code or None) or
 * (callable check_fn, code or None, owner). An entry with an owner is only
 * used while that object is this thread's callback (one compile() config's
 * entries are not another's: other backend, fullgraph); one without serves
 * every callback. */
static int
entry_is_valid(PyObject *entry)
{
    if (!PyTuple_CheckExact(entry) ||
        (PyTuple_GET_SIZE(entry) != 2 && PyTuple_GET_SIZE(entry) != 3)) {
        return 0;
    }
    PyObject *code = PyTuple_GET_ITEM(entry, 1);
    return PyCallable_Check(PyTuple_GET_ITEM(entry, 0)) &&
           (code == Py_None || PyCode_Check(code));
}

/* Move list[index] (== entry) to the front without touching refcounts. */
static void
move_to_front(PyObject *list, Py_ssize_t index, PyObject *entry)
{
    if (index == 0 || index >= PyList_GET_SIZE(list) ||
        PyList_GET_ITEM(list, index) != entry) {
        return; /* first already, or the list changed under us */
    }
    PyObject **items = ((PyListObject *)list)->ob_item;
    memmove(&items[1], &items[0], (size_t)index * sizeof(PyObject *));
    items[0] = entry;
}

/* Find the first entry of `list` whose check_fn(*args, globals, func)
 * returns True. Returns a new reference to the entry (moved to the front),
 * NULL with no error set on a miss, NULL with an error set on failure.
 * A raising check_fn is reported as unraisable and counts as a miss; a
 * GuardProgram is run directly and only a non-Exception error (e.g.
 * KeyboardInterrupt) escapes it, which is returned as a failure. */
/* Is `entry` (a valid one) usable while `cb` is the callback? */
static inline int
entry_serves(PyObject *entry, PyObject *cb)
{
    return PyTuple_GET_SIZE(entry) == 2 || PyTuple_GET_ITEM(entry, 2) == cb;
}

static PyObject *
cache_lookup(PyObject *list, PyObject **args, Py_ssize_t nargs,
             PyObject *globals, PyObject *func)
{
    PyObject *small[DL_SMALL_ARGS + 1];
    PyObject **buf = small;
    Py_ssize_t total = nargs + 2;
    if (total + 1 > DL_SMALL_ARGS + 1) {
        buf = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
        if (buf == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    /* buf[0] is scratch space so callees may use
     * PY_VECTORCALL_ARGUMENTS_OFFSET (e.g. bound methods). */
    PyObject **argv = buf + 1;
    if (nargs > 0) {
        memcpy(argv, args, (size_t)nargs * sizeof(PyObject *));
    }
    argv[nargs] = globals;
    argv[nargs + 1] = func;
    size_t nargsf = (size_t)total | PY_VECTORCALL_ARGUMENTS_OFFSET;

    PyObject *found = NULL;
    Py_INCREF(list);
    PyObject *cb = callback_suspend();
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *entry = PyList_GET_ITEM(list, i);
        if (!entry_is_valid(entry)) {
            PyErr_Format(PyExc_TypeError,
                         "dynamo_lite cache entry must be a "
                         "(check_fn, code or None[, owner]) tuple, got %R", entry);
            PyErr_WriteUnraisable(list);
            continue;
        }
        if (!entry_serves(entry, cb)) {
            continue;
        }
        Py_INCREF(entry);
        PyObject *check_fn = PyTuple_GET_ITEM(entry, 0);
        if (check_fn == always_sentinel) {
            found = entry; /* stays where it is: last */
            break;
        }
        if (Py_IS_TYPE(check_fn, &DLGuardProgramType)) {
            /* The usual case: a compiled GuardProgram, run directly. */
            int r = dl_guard_program_check(check_fn, argv, total);
            if (r > 0) {
                move_to_front(list, i, entry);
                found = entry; /* keeps the reference taken above */
                break;
            }
            Py_DECREF(entry);
            if (r < 0) {
                break; /* e.g. KeyboardInterrupt: propagates */
            }
            continue;
        }
        PyObject *ok = PyObject_Vectorcall(check_fn, argv, nargsf, NULL);
        if (ok == NULL) {
            PyErr_WriteUnraisable(check_fn);
        }
        else if (ok == Py_True) {
            Py_DECREF(ok);
            move_to_front(list, i, entry);
            found = entry; /* keeps the reference taken above */
            break;
        }
        else {
            Py_DECREF(ok);
        }
        Py_DECREF(entry);
    }
    callback_resume(cb);
    Py_DECREF(list);
    if (buf != small) {
        PyMem_Free(buf);
    }
    return found;
}

/* ------------------------------------------------------------------------ */
/* The eval-frame function                                                  */
/* ------------------------------------------------------------------------ */

/* Run a cache entry for a fresh frame: code None runs the original frame;
 * otherwise a function made of the entry's code, the frame's globals and
 * the original function's closure is called with the nargs arguments and
 * its result is returned without evaluating the frame. */
static PyObject *
run_entry(PyThreadState *tstate, DLFrame *frame, int throwflag,
          PyObject *entry, PyObject **args, Py_ssize_t nargs)
{
    PyObject *new_code = PyTuple_GET_ITEM(entry, 1);
    if (new_code == Py_None) {
        return delegate(tstate, frame, throwflag);
    }
    PyObject *func = dl_frame_func(frame);
    PyObject *closure = PyFunction_GET_CLOSURE(func);
    int nfree = dl_code_nfreevars((PyCodeObject *)new_code);
    if (nfree > 0 &&
        (closure == NULL || PyTuple_GET_SIZE(closure) != nfree)) {
        PyErr_Format(PyExc_TypeError,
                     "dynamo_lite: code %R has %d free variables but the "
                     "original function's closure has %zd cells",
                     new_code, nfree,
                     closure == NULL ? (Py_ssize_t)0
                                     : PyTuple_GET_SIZE(closure));
        return NULL;
    }
    PyObject *fn = PyFunction_New(new_code, dl_frame_globals(frame));
    if (fn == NULL) {
        return NULL;
    }
    if (closure != NULL && PyFunction_SetClosure(fn, closure) < 0) {
        Py_DECREF(fn);
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);
    Py_DECREF(fn);
    return result;
}

/* {argname: value} for the nargs argument slots (NULL slots skipped). */
static PyObject *
make_arg_dict(PyCodeObject *code, PyObject **args, Py_ssize_t nargs)
{
    PyObject *names = dl_code_localsplusnames(code);
    PyObject *dict = PyDict_New();
    if (dict == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (args[i] == NULL) {
            continue;
        }
        if (PyDict_SetItem(dict, PyTuple_GET_ITEM(names, i), args[i]) < 0) {
            Py_DECREF(dict);
            return NULL;
        }
    }
    return dict;
}

/* Cache miss: ask this thread's callback what to do with the frame. */
static PyObject *
handle_miss(PyThreadState *tstate, DLFrame *frame, int throwflag,
            PyCodeObject *code, PyObject **args, Py_ssize_t nargs)
{
    PyObject *func = dl_frame_func(frame);
    PyObject *f_locals = make_arg_dict(code, args, nargs);
    if (f_locals == NULL) {
        return NULL;
    }
    PyObject *cb = callback_suspend();
    if (cb == NULL) {
        /* Turned off for this thread while guards ran. */
        Py_DECREF(f_locals);
        return delegate(tstate, frame, throwflag);
    }
    PyObject *cb_args[4] = {NULL, (PyObject *)code, f_locals, func};
    PyObject *res = PyObject_Vectorcall(
        cb, cb_args + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    callback_resume(cb);
    Py_DECREF(f_locals);

    if (res == NULL) {
        return NULL;
    }
    if (res == Py_None) {
        Py_DECREF(res);
        return delegate(tstate, frame, throwflag);
    }
    if (res == skip_sentinel) {
        Py_DECREF(res);
        if (cache_set(code, skip_sentinel) < 0) {
            return NULL;
        }
        return delegate(tstate, frame, throwflag);
    }
    if (!entry_is_valid(res)) {
        PyErr_Format(PyExc_TypeError,
                     "dynamo_lite callback must return None, SKIP or a "
                     "(check_fn, code or None[, owner]) tuple, not %R", res);
        Py_DECREF(res);
        return NULL;
    }
    /* Insert at the front (an ALWAYS entry: at the end, once); re-read
     * co_extra, the callback may have changed it. A returned entry replaces
     * SKIP or anything that is not a list. */
    PyObject *extra = cache_get(code);
    if (extra != NULL && PyList_CheckExact(extra)) {
        int rc;
        if (PyTuple_GET_ITEM(res, 0) != always_sentinel) {
            rc = PyList_Insert(extra, 0, res);
        }
        else {
            /* ALWAYS entries sit at the end (compiled entries go in front):
             * one per owner. */
            int has_always = 0;
            for (Py_ssize_t i = PyList_GET_SIZE(extra) - 1; i >= 0; i--) {
                PyObject *e = PyList_GET_ITEM(extra, i);
                if (!entry_is_valid(e) || PyTuple_GET_ITEM(e, 0) != always_sentinel) {
                    break;
                }
                if (PyTuple_GET_SIZE(e) == PyTuple_GET_SIZE(res) &&
                    (PyTuple_GET_SIZE(e) == 2 ||
                     PyTuple_GET_ITEM(e, 2) == PyTuple_GET_ITEM(res, 2))) {
                    has_always = 1;
                    break;
                }
            }
            rc = has_always ? 0 : PyList_Append(extra, res);
        }
        if (rc < 0) {
            Py_DECREF(res);
            return NULL;
        }
    }
    else {
        PyObject *list = PyList_New(1);
        if (list == NULL) {
            Py_DECREF(res);
            return NULL;
        }
        Py_INCREF(res);
        PyList_SET_ITEM(list, 0, res);
        int rc = cache_set(code, list);
        Py_DECREF(list);
        if (rc < 0) {
            Py_DECREF(res);
            return NULL;
        }
    }
    PyObject *result = run_entry(tstate, frame, throwflag, res, args, nargs);
    Py_DECREF(res);
    return result;
}

/* Slow part of the hook: a fresh frame of a plain function whose code is not
 * marked SKIP. Kept out of line so the filter path stays small. */
static Py_NO_INLINE PyObject *
handle_frame(PyThreadState *tstate, DLFrame *frame, int throwflag,
             PyCodeObject *code, PyObject *extra)
{
    int flags = code->co_flags;
    Py_ssize_t nargs = (Py_ssize_t)code->co_argcount +
                       code->co_kwonlyargcount +
                       ((flags & CO_VARARGS) ? 1 : 0) +
                       ((flags & CO_VARKEYWORDS) ? 1 : 0);
    PyObject **args = dl_frame_localsplus(frame);

    if (extra != NULL && PyList_CheckExact(extra)) {
        PyObject *entry = cache_lookup(extra, args, nargs,
                                       dl_frame_globals(frame),
                                       dl_frame_func(frame));
        if (entry != NULL) {
            PyObject *result = run_entry(tstate, frame, throwflag, entry,
                                         args, nargs);
            Py_DECREF(entry);
            return result;
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    return handle_miss(tstate, frame, throwflag, code, args, nargs);
}

static PyObject *
dl_eval_frame(PyThreadState *tstate, DLFrame *frame, int throwflag)
{
    if (frame == tls_delegating) {
        /* prev_eval chained back to us with the frame we gave it. */
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    if (throwflag || tls_callback == NULL) {
        return delegate(tstate, frame, throwflag);
    }
    PyCodeObject *code = dl_frame_code(frame);
    int flags = code->co_flags;
    if (!(flags & CO_OPTIMIZED) ||
        (flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR |
                  CO_ITERABLE_COROUTINE)) ||
        !dl_frame_is_fresh(frame) || dl_frame_func(frame) == NULL) {
        return delegate(tstate, frame, throwflag);
    }
    PyObject *extra = cache_get(code);
    if (extra == skip_sentinel) {
        return delegate(tstate, frame, throwflag);
    }
    return handle_frame(tstate, frame, throwflag, code, extra);
}

/* ------------------------------------------------------------------------ */
/* SKIP sentinel type                                                       */
/* ------------------------------------------------------------------------ */

static PyObject *
skip_repr(PyObject *self)
{
    return PyUnicode_FromString("<dynamo_lite._C.SKIP>");
}

/* Pickle/copy as the module global: copy.copy(SKIP) is SKIP. */
static PyObject *
skip_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyUnicode_FromString("SKIP");
}

static PyMethodDef skip_methods[] = {
    {"__reduce__", skip_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SkipType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.SkipType",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Type of the SKIP sentinel: a code object marked SKIP is "
              "never passed to the callback.",
    .tp_repr = skip_repr,
    .tp_methods = skip_methods,
};

/* ------------------------------------------------------------------------ */
/* ALWAYS check                                                             */
/* ------------------------------------------------------------------------ */

static PyObject *
always_repr(PyObject *self)
{
    return PyUnicode_FromString("<dynamo_lite._C.ALWAYS>");
}

static PyObject *
always_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyUnicode_FromString("ALWAYS");
}

/* Called like a check function: any arguments, always True. */
static PyObject *
always_call(PyObject *self, PyObject *args, PyObject *kwds)
{
    Py_RETURN_TRUE;
}

static PyMethodDef always_methods[] = {
    {"__reduce__", always_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AlwaysType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.AlwaysType",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Type of the ALWAYS check: an entry (ALWAYS, code) matches "
              "every call and is kept last in its cache list (the fallback "
              "when no other entry matches).",
    .tp_repr = always_repr,
    .tp_call = always_call,
    .tp_methods = always_methods,
};

/* ------------------------------------------------------------------------ */
/* DisabledCall                                                             */
/* ------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *fn;          /* wrapped callable (strong; NULL only after
                              the GC cleared the instance) */
    PyObject *dict;        /* instance __dict__ (strong or NULL), so that
                              functools.update_wrapper works */
    PyObject *weakreflist; /* weak references (or NULL) */
    vectorcallfunc vectorcall;
    PyObject *callback;    /* NULL: call fn with the hook off; else call it
                              with this callback on (strong) */
} DisabledCallObject;

static PyTypeObject DisabledCallType;

/* Error for an instance whose fn was cleared by the GC. */
static PyObject *
disabled_cleared(void)
{
    PyErr_SetString(PyExc_RuntimeError, "DisabledCall has been cleared");
    return NULL;
}

static PyObject *
disabled_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                    PyObject *kwnames)
{
    PyObject *fn = ((DisabledCallObject *)self)->fn;
    if (fn == NULL) {
        return disabled_cleared();
    }
    Py_INCREF(fn);
    PyObject *callback = ((DisabledCallObject *)self)->callback;
    PyObject *cb = callback_suspend();
    if (callback != NULL) {
        /* a compiled function's wrapper: its callback for the call, without a
         * Python frame of ours between the caller and fn */
        ensure_installed(PyThreadState_Get());
        Py_INCREF(callback);
        tls_callback = callback;
    }
    PyObject *result = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    callback_resume(cb);
    Py_DECREF(fn);
    return result;
}

static PyObject *
disabled_wrap(PyTypeObject *type, PyObject *fn, PyObject *callback)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError,
                     "DisabledCall() argument must be callable, not %.200s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    DisabledCallObject *self =
        (DisabledCallObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    Py_INCREF(fn);
    self->fn = fn;
    Py_XINCREF(callback);
    self->callback = callback;
    self->vectorcall = disabled_vectorcall;
    return (PyObject *)self;
}

static PyObject *
disabled_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fn, *callback = Py_None;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "DisabledCall() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "DisabledCall", 1, 2, &fn, &callback)) {
        return NULL;
    }
    if (callback != Py_None && !PyCallable_Check(callback)) {
        PyErr_SetString(PyExc_TypeError, "DisabledCall() callback must be callable or None");
        return NULL;
    }
    return disabled_wrap(type, fn, callback == Py_None ? NULL : callback);
}

static int
disabled_traverse(DisabledCallObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fn);
    Py_VISIT(self->dict);
    Py_VISIT(self->callback);
    return 0;
}

static int
disabled_clear(DisabledCallObject *self)
{
    Py_CLEAR(self->fn); /* calls of a cleared instance raise */
    Py_CLEAR(self->dict);
    Py_CLEAR(self->callback);
    return 0;
}

static void
disabled_dealloc(DisabledCallObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    Py_CLEAR(self->dict);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->callback);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Bind like a function does: DisabledCall(f).__get__(obj) is
 * DisabledCall(f.__get__(obj)), so it works as a method. */
static PyObject *
disabled_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    PyObject *fn = ((DisabledCallObject *)self)->fn;
    descrgetfunc get = fn == NULL ? NULL : Py_TYPE(fn)->tp_descr_get;
    if (obj == NULL || obj == Py_None || get == NULL) {
        Py_INCREF(self);
        return self;
    }
    PyObject *bound = get(fn, obj, type);
    if (bound == NULL) {
        return NULL;
    }
    PyObject *result = disabled_wrap(Py_TYPE(self), bound, ((DisabledCallObject *)self)->callback);
    Py_DECREF(bound);
    return result;
}

static PyObject *
disabled_repr(DisabledCallObject *self)
{
    if (self->fn == NULL) {
        return PyUnicode_FromString("<dynamo_lite._C.DisabledCall (cleared)>");
    }
    if (self->callback != NULL) {
        return PyUnicode_FromFormat("<dynamo_lite compiled %R>", self->fn);
    }
    return PyUnicode_FromFormat("<dynamo_lite._C.DisabledCall of %R>",
                                self->fn);
}

static PyObject *
disabled_get_wrapped(DisabledCallObject *self, void *Py_UNUSED(closure))
{
    if (self->fn == NULL) {
        return disabled_cleared();
    }
    Py_INCREF(self->fn);
    return self->fn;
}

/* Settable (to a callable) so functools.update_wrapper, which assigns
 * __wrapped__, works; it stays the function that is called. */
static int
disabled_set_wrapped(DisabledCallObject *self, PyObject *value,
                     void *Py_UNUSED(closure))
{
    if (value == NULL || !PyCallable_Check(value)) {
        PyErr_SetString(PyExc_TypeError,
                        "DisabledCall.__wrapped__ must be a callable");
        return -1;
    }
    Py_INCREF(value);
    Py_SETREF(self->fn, value);
    return 0;
}

static PyGetSetDef disabled_getset[] = {
    {"__wrapped__", (getter)disabled_get_wrapped,
     (setter)disabled_set_wrapped, "The wrapped callable.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DisabledCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.DisabledCall",
    .tp_basicsize = sizeof(DisabledCallObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "DisabledCall(fn, callback=None): calling it calls fn(*args, **kwargs) "
              "with this thread's dynamo_lite callback switched off (or set to callback "
              "for the call), adding no Python frame.",
    .tp_new = disabled_new,
    .tp_dealloc = (destructor)disabled_dealloc,
    .tp_traverse = (traverseproc)disabled_traverse,
    .tp_clear = (inquiry)disabled_clear,
    .tp_vectorcall_offset = offsetof(DisabledCallObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = disabled_descr_get,
    .tp_repr = (reprfunc)disabled_repr,
    .tp_getset = disabled_getset,
    .tp_dictoffset = offsetof(DisabledCallObject, dict),
    .tp_weaklistoffset = offsetof(DisabledCallObject, weakreflist),
};

/* ------------------------------------------------------------------------ */
/* Module functions                                                         */
/* ------------------------------------------------------------------------ */

static PyObject *
dl_set_callback(PyObject *module, PyObject *cb)
{
    if (cb == Py_None) {
        cb = NULL;
    }
    else if (!PyCallable_Check(cb)) {
        PyErr_Format(PyExc_TypeError,
                     "callback must be callable or None, not %.200s",
                     Py_TYPE(cb)->tp_name);
        return NULL;
    }
    else {
        ensure_installed(PyThreadState_Get());
    }
    PyObject *previous = tls_callback;
    Py_XINCREF(cb);
    tls_callback = cb;
    if (previous == NULL) {
        Py_RETURN_NONE;
    }
    return previous; /* our reference passes to the caller */
}

static PyObject *
dl_get_callback(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    if (tls_callback == NULL) {
        Py_RETURN_NONE;
    }
    Py_INCREF(tls_callback);
    return tls_callback;
}

static PyObject *
dl_uninstall(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    PyThreadState *tstate = PyThreadState_Get();
    if (dl_get_eval_frame(tstate) == dl_eval_frame) {
        dl_set_eval_frame(tstate, prev_eval != NULL
                                      ? prev_eval
                                      : _PyEval_EvalFrameDefault);
    }
    prev_eval = NULL;
    Py_RETURN_NONE;
}

static PyObject *
dl_is_installed(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(dl_get_eval_frame(PyThreadState_Get()) ==
                           dl_eval_frame);
}

static int
check_code(PyObject *code)
{
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "expected a code object, not %.200s",
                     Py_TYPE(code)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *
dl_get_cache(PyObject *module, PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    PyObject *extra = cache_get((PyCodeObject *)code);
    if (extra == NULL) {
        Py_RETURN_NONE;
    }
    Py_INCREF(extra);
    return extra;
}

static PyObject *
dl_set_cache(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "set_cache() takes exactly 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    PyObject *code = args[0];
    PyObject *obj = args[1];
    if (check_code(code) < 0) {
        return NULL;
    }
    if (obj == Py_None) {
        obj = NULL;
    }
    else if (obj != skip_sentinel && !PyList_CheckExact(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "cache must be a list, SKIP or None, not %.200s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (cache_set((PyCodeObject *)code, obj) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef dl_methods[] = {
    {"set_callback", dl_set_callback, METH_O,
     "set_callback(cb) -> previous\n\nSet this thread's callback "
     "(None turns the hook off for this thread) and return the previous "
     "one. Installs the eval-frame hook if it is not installed."},
    {"get_callback", dl_get_callback, METH_NOARGS,
     "get_callback() -> this thread's callback or None."},
    {"uninstall", dl_uninstall, METH_NOARGS,
     "uninstall()\n\nIf our eval-frame function is installed, put back the "
     "one it replaced (or the default)."},
    {"_is_installed", dl_is_installed, METH_NOARGS,
     "_is_installed() -> True if our eval-frame function is installed."},
    {"get_cache", dl_get_cache, METH_O,
     "get_cache(code) -> None, SKIP or the cache list stored on code."},
    {"set_cache", (PyCFunction)(void (*)(void))dl_set_cache, METH_FASTCALL,
     "set_cache(code, obj)\n\nStore a list, SKIP, or None (clear) on code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef dl_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dynamo_lite._C",
    .m_doc = "The PEP 523 frame-evaluation hook of dynamo_lite "
             "(see csrc/eval_frame.c).",
    .m_size = -1,
    .m_methods = dl_methods,
};

PyMODINIT_FUNC
PyInit__C(void)
{
    if (PyType_Ready(&SkipType) < 0 || PyType_Ready(&DisabledCallType) < 0 ||
        PyType_Ready(&AlwaysType) < 0) {
        return NULL;
    }
    if (always_sentinel == NULL) {
        always_sentinel = PyType_GenericAlloc(&AlwaysType, 0);
        if (always_sentinel == NULL) {
            return NULL;
        }
    }
    if (skip_sentinel == NULL) {
        skip_sentinel = PyType_GenericAlloc(&SkipType, 0);
        if (skip_sentinel == NULL) {
            return NULL;
        }
    }
    if (cache_index < 0) {
        cache_index = _PyEval_RequestCodeExtraIndex(cache_free);
        if (cache_index < 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "dynamo_lite: no free co_extra index");
            return NULL;
        }
    }
    PyObject *m = PyModule_Create(&dl_module);
    if (m == NULL) {
        return NULL;
    }
    if (dl_guards_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "SKIP", skip_sentinel) < 0 ||
        PyModule_AddObjectRef(m, "ALWAYS", always_sentinel) < 0 ||
        PyModule_AddObjectRef(m, "DisabledCall",
                              (PyObject *)&DisabledCallType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
