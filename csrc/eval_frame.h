/*
 * eval_frame.h -- the hook's per-thread state (csrc/eval_frame.c), as the
 * cache (csrc/cache_entry.c) and the call scopes (csrc/call_scope.c) see it.
 *
 * dl_tls_callback is this thread's callback: a strong reference, or NULL when
 * the hook is off for the thread. It is NULL while the callback, a guard or a
 * CallWithHookOff runs, and restored afterwards on every path: take it out
 * with dl_callback_suspend() and put it back with dl_callback_resume(), which
 * drops anything set in between (a set_callback() inside such a call is
 * scoped to it).
 * Tested by tests/unit/test_c_hook.py.
 */
#ifndef DYNAMO_LITE_EVAL_FRAME_H
#define DYNAMO_LITE_EVAL_FRAME_H

#include "cpython_compat.h"

/* Shared between the translation units of _C only (no PLT/GOT detour). */
#if defined(__GNUC__)
#define DL_INTERNAL __attribute__((visibility("hidden")))
#else
#define DL_INTERNAL
#endif

DL_INTERNAL extern _Thread_local PyObject *dl_tls_callback;

/* The hook is installed only while some callback is live: set for a thread
 * (its dl_tls_callback) or suspended by a C call that will put it back. Each
 * callback that becomes live takes the hook (dl_hook_acquire: the first one
 * installs it); each one dropped gives it back (dl_hook_release: the last one
 * puts the previous eval-frame function back). While any PEP 523 function is
 * installed CPython does not inline Python-to-Python calls, so code that runs
 * outside every compiled call and capture region pays nothing. */
DL_INTERNAL void dl_hook_acquire(void);
DL_INTERNAL void dl_hook_release(void);

/* A call scope (call_scope.c) suspended this thread's live callback for the
 * length of a call: pause it, and unpause it before putting it back
 * (balanced). A paused callback does not need the hook: when every live
 * callback is paused (a CallWithHookOff runs a graph or a runtime helper,
 * code that is never captured), the previous eval-frame function is put
 * back for the call, so its Python runs with CPython's inlined calls. */
DL_INTERNAL void dl_hook_pause(void);
DL_INTERNAL void dl_hook_unpause(void);

/* Take this thread's callback out (hook off); returns the owned reference. */
static inline PyObject *
dl_callback_suspend(void)
{
    PyObject *cb = dl_tls_callback;
    dl_tls_callback = NULL;
    return cb;
}

/* Put back a callback taken by dl_callback_suspend, dropping anything that
 * was set in between. */
static inline void
dl_callback_resume(PyObject *cb)
{
    PyObject *inner = dl_tls_callback;
    dl_tls_callback = cb;
    if (inner != NULL) {
        dl_hook_release();
        Py_DECREF(inner);
    }
}

/* Argument references lent to the next frame the hook sees (see
 * dl_call_moving): args is NULL when nothing is lent. */
typedef struct {
    PyObject *func;    /* the function called (borrowed) */
    PyObject **args;   /* the caller's slots holding its owned references */
    Py_ssize_t nargs;
} DLHandOver;

DL_INTERNAL extern _Thread_local DLHandOver dl_tls_handover;

/* fn(*args) for a plain function fn, where args[0..nargs) are slots of the
 * caller's holding owned references (never NULL on entry). Once fn's frame
 * holds its own references to them (the hook is entered with that frame),
 * the caller's are dropped and the slots set to NULL, so that the callee's
 * frame is the only holder, as when CPython's own CALL moves arguments into
 * an inlined frame (it cannot while an eval-frame function is installed).
 * On return the caller Py_XDECREFs its slots: some are still set if no frame
 * took them (fn's frame was not made, or not evaluated by our hook). */
DL_INTERNAL PyObject *dl_call_moving(PyObject *fn, PyObject **args,
                                     Py_ssize_t nargs);

/* Make ours the interpreter's eval-frame function (cheap if it already is). */
DL_INTERNAL void dl_hook_ensure_installed(PyThreadState *tstate);

/* Add CallWithHookOff and CallWithCallback (csrc/call_scope.c); 0 on
 * success. */
DL_INTERNAL int dl_call_scope_init(PyObject *module);

#endif /* DYNAMO_LITE_EVAL_FRAME_H */
