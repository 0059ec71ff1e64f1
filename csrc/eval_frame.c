/*
 * eval_frame.c -- the PEP 523 hook of dynamo_lite, built as dynamo_lite._C
 * (with cache_entry.c, call_scope.c and guards.c).
 *
 * Role in the pipeline: C does only what Python cannot.
 *   - hold a per-thread callback (None = hook inactive for this thread);
 *   - install our eval-frame function interpreter-wide, chaining to whatever
 *     other PEP 523 user (e.g. torch.compile) was installed before us;
 *   - filter frames (fresh calls of plain functions only);
 *   - look the frame up in its code's cache (cache_entry.c: NULL, SKIP, or a
 *     list of CacheEntry), and on a miss ask the callback, whose answer is a
 *     CacheEntry, SKIP or RUN_EAGER (the protocol: cache_entry.c);
 *   - run the chosen entry's code in place of the original frame.
 * Everything else (what to compile, guards, codegen) is Python.
 *
 * Invariants:
 *   - dl_tls_callback is a strong reference or NULL; it is NULL (hook off for
 *     the thread) while the callback, a check, or a CallWithHookOff runs, and
 *     is restored afterwards on every path. Anything set with set_callback()
 *     during such a call is scoped to it and dropped on restore.
 *   - When we do not handle a frame we call prev_eval if set, else
 *     _PyEval_EvalFrameDefault; prev_eval is never our own function.
 *   - Frames we handle by running other code are returned from without being
 *     evaluated, and cleared and popped (dl_frame_clear_and_pop: by the
 *     caller in 3.11, by us from 3.12 on). Their arguments move
 *     to the frame of the code run instead (dl_call_moving): their slots are
 *     NULL by the time that code runs, so an argument it drops dies there,
 *     as it would in the original frame.
 *   - All interpreter-version knowledge lives in cpython_compat.h.
 *
 * Tested by tests/unit/test_c_hook.py.
 */
#include "cache_entry.h"
#include "guards.h"

/* ------------------------------------------------------------------------ */
/* Global and per-thread state                                              */
/* ------------------------------------------------------------------------ */

/* Eval-frame function that was installed before ours (NULL = default). */
static dl_eval_frame_fn prev_eval = NULL;

/* This thread's callback: strong reference, or NULL when inactive. */
_Thread_local PyObject *dl_tls_callback = NULL;

/* Frame currently being handed to prev_eval by this thread; if prev_eval
 * hands the very same frame back to us (it chained to us), we run it with
 * the default evaluator instead of looping. */
static _Thread_local DLFrame *tls_delegating = NULL;

/* References lent to the next frame (dl_call_moving). */
_Thread_local DLHandOver dl_tls_handover = {NULL, NULL, 0};

static PyObject *dl_eval_frame(PyThreadState *tstate, DLFrame *frame,
                               int throwflag);

void
dl_hook_ensure_installed(PyThreadState *tstate)
{
    dl_eval_frame_fn cur = dl_get_eval_frame(tstate);
    if (cur != dl_eval_frame) {
        prev_eval = dl_eval_is_default(cur) ? NULL : cur;
        dl_set_eval_frame(tstate, dl_eval_frame);
    }
}

/* If ours is the installed eval-frame function, put back the one it replaced. */
static void
hook_uninstall(PyThreadState *tstate)
{
    if (dl_get_eval_frame(tstate) == dl_eval_frame) {
        dl_set_eval_frame(tstate, prev_eval != NULL
                                      ? prev_eval
                                      : _PyEval_EvalFrameDefault);
    }
    prev_eval = NULL;
}

/* The "force_eager" stance (dynamo_lite/stance.py): every frame runs as if
 * no callback were set, cached entries included. */
static int force_eager = 0;

/* Live callbacks over all threads, and how many of them a CallWithHookOff
 * has paused (see eval_frame.h); the GIL guards both. The hook is installed
 * while live_callbacks > paused_callbacks. */
static Py_ssize_t live_callbacks = 0;
static Py_ssize_t paused_callbacks = 0;

void
dl_hook_acquire(void)
{
    live_callbacks++;
    /* (also when already live: another PEP 523 user may have replaced us) */
    dl_hook_ensure_installed(PyThreadState_Get());
}

void
dl_hook_release(void)
{
    if (live_callbacks > 0 && --live_callbacks <= paused_callbacks) {
        hook_uninstall(PyThreadState_Get());
    }
}

void
dl_hook_pause(void)
{
    if (++paused_callbacks >= live_callbacks) {
        hook_uninstall(PyThreadState_Get());
    }
}

void
dl_hook_unpause(void)
{
    if (--paused_callbacks < live_callbacks) {
        dl_hook_ensure_installed(PyThreadState_Get());
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
/* Moving arguments into a callee's frame                                   */
/* ------------------------------------------------------------------------ */

PyObject *
dl_call_moving(PyObject *fn, PyObject **args, Py_ssize_t nargs)
{
    /* Nothing runs between the call and its frame reaching the hook (the
     * function's vectorcall makes the frame and evaluates it at once), so
     * one slot per thread is enough; the first frame entered clears it. */
    /* Only our eval-frame function takes the references over: install it for
     * the call if no live callback holds it (generated code always runs with
     * one; a direct call_moving() may not). */
    int own = dl_get_eval_frame(PyThreadState_Get()) != dl_eval_frame;
    if (own) {
        dl_hook_acquire();
    }
    dl_tls_handover.func = fn;
    dl_tls_handover.args = args;
    dl_tls_handover.nargs = nargs;
    PyObject *result = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);
    dl_tls_handover.args = NULL;
    if (own) {
        dl_hook_release();
    }
    return result;
}

/* First thing on entering any frame: if references were lent for this very
 * call (same function, the frame's first nargs positional slots hold the
 * same objects), the frame now owns references of its own: drop the lent
 * ones. The identity check makes a wrong match harmless: the frame holds
 * every object whose lent reference is dropped. */
static Py_NO_INLINE void
take_handover(DLFrame *frame)
{
    DLHandOver lent = dl_tls_handover;
    dl_tls_handover.args = NULL;
    if (dl_frame_func(frame) != lent.func || !dl_frame_is_fresh(frame) ||
        lent.nargs > dl_frame_code(frame)->co_argcount) {
        return;
    }
    PyObject **locals = dl_frame_localsplus(frame);
    for (Py_ssize_t i = 0; i < lent.nargs; i++) {
        if (locals[i] != lent.args[i]) {
            return;
        }
    }
    for (Py_ssize_t i = 0; i < lent.nargs; i++) {
        PyObject *obj = lent.args[i];
        lent.args[i] = NULL;
        Py_XDECREF(obj); /* never the last reference: the frame holds it */
    }
}

/* ------------------------------------------------------------------------ */
/* The eval-frame function                                                  */
/* ------------------------------------------------------------------------ */

/* Run a cache entry for a fresh frame: code None runs the original frame;
 * otherwise the entry's code runs in its place (cache_entry.c). */
static inline PyObject *
run_entry(PyThreadState *tstate, DLFrame *frame, int throwflag,
          DLCacheEntry *entry, PyObject **args, Py_ssize_t nargs,
          int *evaluated)
{
    if (entry->code == Py_None) {
        *evaluated = 1;
        if (entry->check == dl_always_check && entry->owner != Py_None) {
            /* A frame past its cache limit (convert_frame's fallback entry):
             * it and everything it calls run eagerly, so its callees are
             * not compiled one by one in its place. */
            PyObject *cb = dl_callback_suspend();
            PyObject *result = delegate(tstate, frame, throwflag);
            dl_callback_resume(cb);
            return result;
        }
        return delegate(tstate, frame, throwflag);
    }
    return dl_cache_entry_run(entry, frame, args, nargs);
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
            PyCodeObject *code, PyObject **args, Py_ssize_t nargs,
            int *evaluated)
{
    PyObject *func = dl_frame_func(frame);
    PyObject *f_locals = make_arg_dict(code, args, nargs);
    if (f_locals == NULL) {
        return NULL;
    }
    PyObject *cb = dl_callback_suspend();
    if (cb == NULL) {
        /* Turned off for this thread while guards ran. */
        Py_DECREF(f_locals);
        *evaluated = 1;
        return delegate(tstate, frame, throwflag);
    }
    PyObject *cb_args[4] = {NULL, (PyObject *)code, f_locals, func};
    PyObject *res = PyObject_Vectorcall(
        cb, cb_args + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    dl_callback_resume(cb);
    Py_DECREF(f_locals);

    if (res == NULL) {
        return NULL;
    }
    if (res == dl_run_eager_marker) {
        Py_DECREF(res);
        *evaluated = 1;
        return delegate(tstate, frame, throwflag);
    }
    if (res == dl_skip_marker) {
        Py_DECREF(res);
        if (dl_cache_mark_skip(code) < 0) {
            return NULL;
        }
        *evaluated = 1;
        return delegate(tstate, frame, throwflag);
    }
    if (!Py_IS_TYPE(res, &DLCacheEntryType)) {
        PyErr_Format(PyExc_TypeError,
                     "dynamo_lite callback must return a CacheEntry, SKIP or "
                     "RUN_EAGER, not %R", res);
        Py_DECREF(res);
        return NULL;
    }
    /* co_extra is re-read by the insert: the callback may have changed it */
    if (dl_cache_insert(code, res) < 0) {
        Py_DECREF(res);
        return NULL;
    }
    PyObject *result = run_entry(tstate, frame, throwflag,
                                 (DLCacheEntry *)res, args, nargs, evaluated);
    Py_DECREF(res);
    return result;
}

/* Slow part of the hook: a fresh frame of a plain function whose code is not
 * marked SKIP. Kept out of line so the filter path stays small. Sets
 * *evaluated when the frame itself was evaluated (the evaluator then cleared
 * and popped it); otherwise the caller must clear and pop it. */
static Py_NO_INLINE PyObject *
handle_frame(PyThreadState *tstate, DLFrame *frame, int throwflag,
             PyCodeObject *code, PyObject *extra, int *evaluated)
{
    int flags = code->co_flags;
    Py_ssize_t nargs = (Py_ssize_t)code->co_argcount +
                       code->co_kwonlyargcount +
                       ((flags & CO_VARARGS) ? 1 : 0) +
                       ((flags & CO_VARKEYWORDS) ? 1 : 0);
    PyObject **args = dl_frame_localsplus(frame);

    if (extra != NULL && PyList_CheckExact(extra)) {
        PyObject *entry = dl_cache_lookup(extra, args, nargs,
                                          dl_frame_globals(frame),
                                          dl_frame_func(frame));
        if (entry != NULL) {
            PyObject *result = run_entry(tstate, frame, throwflag,
                                         (DLCacheEntry *)entry, args, nargs,
                                         evaluated);
            Py_DECREF(entry);
            return result;
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    return handle_miss(tstate, frame, throwflag, code, args, nargs,
                       evaluated);
}

static PyObject *
dl_eval_frame(PyThreadState *tstate, DLFrame *frame, int throwflag)
{
    if (dl_tls_handover.args != NULL) {
        take_handover(frame);
    }
    if (frame == tls_delegating) {
        /* prev_eval chained back to us with the frame we gave it. */
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    if (throwflag || dl_tls_callback == NULL || force_eager ||
        dl_tstate_is_tracing(tstate)) {
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
    PyObject *extra = dl_cache_get(code);
    if (extra == dl_skip_marker) {
        return delegate(tstate, frame, throwflag);
    }
    int evaluated = 0;
    PyObject *result =
        handle_frame(tstate, frame, throwflag, code, extra, &evaluated);
    if (!evaluated) {
        /* we ran other code in its place (or failed before running any) */
        dl_frame_clear_and_pop(tstate, frame);
    }
    return result;
}

/* ------------------------------------------------------------------------ */
/* Module functions                                                         */
/* ------------------------------------------------------------------------ */

/* call_moving(fn, args_list): see the method table. */
static PyObject *
dl_call_moving_py(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 2 || !PyList_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "call_moving(fn, args) takes a function and a list");
        return NULL;
    }
    PyObject *fn = argv[0];
    PyObject *list = argv[1];
    Py_ssize_t nargs = PyList_GET_SIZE(list);
    PyObject *small[8];
    PyObject **args = small;
    if (nargs > (Py_ssize_t)(sizeof(small) / sizeof(small[0]))) {
        args = PyMem_New(PyObject *, nargs);
        if (args == NULL) {
            return PyErr_NoMemory();
        }
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        args[i] = Py_NewRef(PyList_GET_ITEM(list, i));
    }
    PyObject *result = NULL;
    /* the list lets go (no item dies: args holds each), so that the callee's
     * frame ends up the only holder */
    if (PyList_SetSlice(list, 0, nargs, NULL) == 0) {
        Py_INCREF(fn);
        result = dl_call_moving(fn, args, nargs);
        Py_DECREF(fn);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_XDECREF(args[i]);
    }
    if (args != small) {
        PyMem_Free(args);
    }
    return result;
}

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
        dl_hook_acquire(); /* before the release below: a swap never uninstalls */
    }
    PyObject *previous = dl_tls_callback;
    Py_XINCREF(cb);
    dl_tls_callback = cb;
    if (previous == NULL) {
        Py_RETURN_NONE;
    }
    dl_hook_release();
    return previous; /* our reference passes to the caller */
}

static PyObject *
dl_get_callback(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    if (dl_tls_callback == NULL) {
        Py_RETURN_NONE;
    }
    Py_INCREF(dl_tls_callback);
    return dl_tls_callback;
}

static PyObject *
dl_uninstall(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    hook_uninstall(PyThreadState_Get());
    Py_RETURN_NONE;
}

static PyObject *
dl_set_force_eager(PyObject *module, PyObject *flag)
{
    int on = PyObject_IsTrue(flag);
    if (on < 0) {
        return NULL;
    }
    force_eager = on;
    Py_RETURN_NONE;
}

static PyObject *
dl_live_callbacks(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(live_callbacks);
}

static PyObject *
dl_is_installed(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(dl_get_eval_frame(PyThreadState_Get()) ==
                           dl_eval_frame);
}

/* thread_local_get(local, name, default): see the method table. */
static PyObject *
dl_thread_local_get_py(PyObject *module, PyObject *const *argv,
                       Py_ssize_t argc)
{
    if (argc != 3 || !PyUnicode_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "thread_local_get(local, name, default) takes a "
                        "threading.local, a str and a default");
        return NULL;
    }
    return dl_thread_local_get(argv[0], argv[1], argv[2]);
}

static PyMethodDef dl_methods[] = {
    {"set_callback", dl_set_callback, METH_O,
     "set_callback(cb) -> previous\n\nSet this thread's callback "
     "(None turns the hook off for this thread) and return the previous "
     "one. Installs the eval-frame hook if it is not installed; the last "
     "callback dropped (over all threads) uninstalls it."},
    {"call_moving", (PyCFunction)(void (*)(void))dl_call_moving_py,
     METH_FASTCALL,
     "call_moving(fn, args) -> fn(*args)\n\nargs is a list, emptied before "
     "the call; once fn's frame holds the arguments (our hook is entered "
     "with it), it is their only holder, as if the caller's CALL had moved "
     "them into an inlined frame: an argument the callee drops dies there. "
     "Generated code calls resume functions this way."},
    {"thread_local_get", (PyCFunction)(void (*)(void))dl_thread_local_get_py,
     METH_FASTCALL,
     "thread_local_get(local, name, default) -> value\n\nThis thread's "
     "`name` in `local` (a threading.local), or `default`: what "
     "getattr(local, name, default) answers, without making and dropping "
     "an AttributeError when the name is unset (guards call it on every "
     "check)."},
    {"get_callback", dl_get_callback, METH_NOARGS,
     "get_callback() -> this thread's callback or None."},
    {"uninstall", dl_uninstall, METH_NOARGS,
     "uninstall()\n\nIf our eval-frame function is installed, put back the "
     "one it replaced (or the default)."},
    {"_is_installed", dl_is_installed, METH_NOARGS,
     "_is_installed() -> True if our eval-frame function is installed."},
    {"_set_force_eager", dl_set_force_eager, METH_O,
     "_set_force_eager(flag)\n\nWhile set, every frame runs as if no "
     "callback were set (the force_eager stance: dynamo_lite/stance.py)."},
    {"_live_callbacks", dl_live_callbacks, METH_NOARGS,
     "_live_callbacks() -> how many callbacks are live over all threads "
     "(set, or suspended by a C call): the hook is installed while it is "
     "not 0."},
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
    PyObject *m = PyModule_Create(&dl_module);
    if (m == NULL) {
        return NULL;
    }
    if (dl_cache_init(m) < 0 || dl_call_scope_init(m) < 0 ||
        dl_guards_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
