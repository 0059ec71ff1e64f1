/*
 * cache_entry.h -- the per-code cache of dynamo_lite._C (csrc/cache_entry.c),
 * as the hook (csrc/eval_frame.c) sees it.
 *
 * co_extra of a code object holds NULL (nothing known), SKIP (never call the
 * callback for it), or a list of CacheEntry objects (most recently hit first;
 * ALWAYS entries last). The list is private to C: it is never handed to
 * Python (get_cache / cache_entries return copies), so every item is a
 * CacheEntry checked once, when it was inserted.
 * Tested by tests/unit/test_c_hook.py.
 */
#ifndef DYNAMO_LITE_CACHE_ENTRY_H
#define DYNAMO_LITE_CACHE_ENTRY_H

#include "eval_frame.h"

/* One compiled (or "run the original") answer for a code object.
 * Every field is a strong reference, set once by the constructor and
 * read-only afterwards, except spare_fn (C's own). */
typedef struct {
    PyObject_HEAD
    /* The guard. A GuardProgram (run directly by C), ALWAYS (matches every
     * call; the entry is kept last in its list), or any callable
     * check(*args, globals, func) where a match is exactly True. Never NULL. */
    PyObject *check;
    /* Code object run in place of the frame (with the frame's globals,
     * builtins and closure), or Py_None: run the original frame. */
    PyObject *code;
    /* The callback whose calls may use this entry (a FrameConverter: one
     * compile() configuration), or Py_None: it serves every callback. */
    PyObject *owner;
    /* "frame/n" str for diagnostics, or Py_None. C never reads it. */
    PyObject *compile_id;
    /* Python's CompiledGuard (explain_failure, render), or Py_None. C never
     * reads it; an entry with a guard is a "compiled entry" for cache.py. */
    PyObject *guard;
    /* The captured torch.fx.GraphModule, or Py_None. C never reads it. */
    PyObject *graph_module;
    /* A function of `code` parked between runs, its globals, builtins and
     * closure pointed at an empty dict / NULL so that it keeps no user object
     * alive; rebound to the frame's on each run (no allocation on a hit).
     * NULL until the first run, and while a run has it out (a recursive hit
     * then builds its own). */
    PyObject *spare_fn;
    /* Creation order (1, 2, ...; never reused): cache.py lists entries
     * newest first by it, whatever order hits have moved them to. */
    unsigned long long serial;
} DLCacheEntry;

DL_INTERNAL extern PyTypeObject DLCacheEntryType;

/* The markers, module-owned strong references that never die:
 * dl_skip_marker is _C.SKIP (stored in co_extra, or returned by the
 * callback); dl_always_check is _C.ALWAYS (a CacheEntry check);
 * dl_run_eager_marker is _C.RUN_EAGER (returned by the callback: run the
 * original frame this time, remember nothing). */
DL_INTERNAL extern PyObject *dl_skip_marker;
DL_INTERNAL extern PyObject *dl_always_check;
DL_INTERNAL extern PyObject *dl_run_eager_marker;

/* co_extra slot owned by this module. */
DL_INTERNAL extern Py_ssize_t dl_cache_index;

/* Borrowed reference to what co_extra holds (NULL, SKIP or the list). */
static inline PyObject *
dl_cache_get(PyCodeObject *code)
{
    void *extra = NULL;
    if (dl_code_get_extra((PyObject *)code, dl_cache_index, &extra) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return (PyObject *)extra;
}

/* Mark code SKIP (replacing its entries). 0 on success, -1 with an error. */
DL_INTERNAL int dl_cache_mark_skip(PyCodeObject *code);

/* Add `entry` (must be a CacheEntry; checked, TypeError otherwise) to code's
 * list: in front, or, for an ALWAYS entry, at the end unless the list already
 * ends with an ALWAYS entry of the same owner. Replaces SKIP. 0 / -1. */
DL_INTERNAL int dl_cache_insert(PyCodeObject *code, PyObject *entry);

/* First entry of `list` (co_extra's list) that serves callback `cb` and whose
 * check passes on (*args, globals, func); it is moved to the front. New
 * reference; NULL with no error on a miss, NULL with an error on failure.
 * The hook is off for the thread while checks run. */
DL_INTERNAL PyObject *dl_cache_lookup(PyObject *list, PyObject **args,
                                      Py_ssize_t nargs, PyObject *globals,
                                      PyObject *func);

/* Run entry->code (not None) for the fresh `frame` with its nargs argument
 * values, its globals, builtins and function closure; its result. */
DL_INTERNAL PyObject *dl_cache_entry_run(DLCacheEntry *entry, DLFrame *frame,
                                         PyObject **args, Py_ssize_t nargs);

/* Types, markers, co_extra index and cache functions; 0 on success. */
DL_INTERNAL int dl_cache_init(PyObject *module);

#endif /* DYNAMO_LITE_CACHE_ENTRY_H */
