/*
 * cache_entry.c -- the CacheEntry type and the per-code cache in co_extra.
 *
 * Role in the pipeline: after the Python callback (convert_frame.py,
 * FrameConverter) has compiled a frame, its answer is kept here, on the code
 * object, and later calls are answered without Python: the first entry whose
 * check passes runs its code.
 *
 * The callback protocol. The hook calls callback(code, f_locals, func) on a
 * miss and the callback returns exactly one of:
 *   - a CacheEntry: inserted into code's list (in front; an ALWAYS entry at
 *     the end, once per owner), then run for this frame;
 *   - SKIP: code is marked SKIP; it is never passed to the callback again
 *     (until cleared);
 *   - RUN_EAGER: run the original frame this time, remember nothing.
 * Anything else is a TypeError raised from the call.
 *
 * A CacheEntry is validated once, by its constructor (check callable, code a
 * code object or None, compile_id a str or None) and its fields are
 * read-only; inserting checks only that the object is a CacheEntry. The list
 * in co_extra is C's own (Python gets copies), so lookups trust it.
 *
 * Lifetime: co_extra holds a strong reference to SKIP or the list (released
 * by cache_free when the code dies or the cache is cleared); the list holds
 * its entries; an entry holds its fields. Clearing a code's cache
 * (set_cache(code, None), cache.reset()) drops its entries. An entry's
 * parked function (spare_fn) holds only the entry's code and an empty dict
 * between runs, so an entry keeps no frame's globals or closure alive.
 *
 * Tested by tests/unit/test_c_hook.py.
 */
#include "cache_entry.h"
#include "guards.h"

#include <string.h>
#include <structmember.h>

/* Size of the on-stack argument buffer for guard calls; bigger calls use the
 * heap. */
#define DL_SMALL_ARGS 16

Py_ssize_t dl_cache_index = -1;
PyObject *dl_skip_marker = NULL;
PyObject *dl_always_check = NULL;
PyObject *dl_run_eager_marker = NULL;

/* Globals and builtins of a parked function: an empty dict, module-owned. */
static PyObject *parked_namespace = NULL;

/* Last serial given to a CacheEntry (creation order). */
static unsigned long long last_serial = 0;

/* ------------------------------------------------------------------------ */
/* Markers (SKIP, RUN_EAGER) and the ALWAYS check                          */
/* ------------------------------------------------------------------------ */

/* SKIP and RUN_EAGER: two instances of one marker type, told apart by name. */
typedef struct {
    PyObject_HEAD
    const char *name; /* "SKIP" or "RUN_EAGER": the module global it is (static string) */
} MarkerObject;

static PyObject *
marker_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<dynamo_lite._C.%s>", ((MarkerObject *)self)->name);
}

/* Pickle/copy as the module global: copy.copy(SKIP) is SKIP. */
static PyObject *
marker_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyUnicode_FromString(((MarkerObject *)self)->name);
}

static PyMethodDef marker_methods[] = {
    {"__reduce__", marker_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MarkerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.Marker",
    .tp_basicsize = sizeof(MarkerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A marker of the cache protocol. SKIP: a code object marked SKIP "
              "is never passed to the callback, and a callback returns SKIP to "
              "mark it. RUN_EAGER: a callback returns it to run the original "
              "frame this time and remember nothing.",
    .tp_repr = marker_repr,
    .tp_methods = marker_methods,
};

static PyObject *
new_marker(const char *name)
{
    MarkerObject *m = PyObject_New(MarkerObject, &MarkerType);
    if (m != NULL) {
        m->name = name;
    }
    return (PyObject *)m;
}

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
    .tp_doc = "Type of the ALWAYS check: an entry CacheEntry(ALWAYS, code) "
              "matches every call and is kept last in its cache list (the "
              "fallback when no other entry matches).",
    .tp_repr = always_repr,
    .tp_call = always_call,
    .tp_methods = always_methods,
};

/* ------------------------------------------------------------------------ */
/* CacheEntry                                                               */
/* ------------------------------------------------------------------------ */

static PyObject *
entry_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"check", "code", "owner", "compile_id", "guard",
                             "graph_module", NULL};
    PyObject *check, *code = Py_None, *owner = Py_None;
    PyObject *compile_id = Py_None, *guard = Py_None, *graph_module = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OO$OOO:CacheEntry", kwlist,
                                     &check, &code, &owner, &compile_id,
                                     &guard, &graph_module)) {
        return NULL;
    }
    if (!PyCallable_Check(check)) {
        PyErr_Format(PyExc_TypeError,
                     "CacheEntry check must be a GuardProgram, ALWAYS or a "
                     "callable, not %.200s", Py_TYPE(check)->tp_name);
        return NULL;
    }
    if (code != Py_None && !PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError,
                     "CacheEntry code must be a code object or None, "
                     "not %.200s", Py_TYPE(code)->tp_name);
        return NULL;
    }
    if (compile_id != Py_None && !PyUnicode_Check(compile_id)) {
        PyErr_Format(PyExc_TypeError,
                     "CacheEntry compile_id must be a str or None, not %.200s",
                     Py_TYPE(compile_id)->tp_name);
        return NULL;
    }
    DLCacheEntry *self = (DLCacheEntry *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->check = Py_NewRef(check);
    self->code = Py_NewRef(code);
    self->owner = Py_NewRef(owner);
    self->compile_id = Py_NewRef(compile_id);
    self->guard = Py_NewRef(guard);
    self->graph_module = Py_NewRef(graph_module);
    self->spare_fn = NULL;
    self->serial = ++last_serial;
    return (PyObject *)self;
}

static int
entry_traverse(DLCacheEntry *self, visitproc visit, void *arg)
{
    Py_VISIT(self->check);
    Py_VISIT(self->code);
    Py_VISIT(self->owner);
    Py_VISIT(self->compile_id);
    Py_VISIT(self->guard);
    Py_VISIT(self->graph_module);
    Py_VISIT(self->spare_fn);
    return 0;
}

/* Only the Python-owned fields can be in a cycle; check and code stay, so a
 * cleared entry (the GC broke a cycle through it) still runs correctly. */
static int
entry_clear(DLCacheEntry *self)
{
    Py_CLEAR(self->spare_fn);
    Py_SETREF(self->owner, Py_NewRef(Py_None));
    Py_SETREF(self->compile_id, Py_NewRef(Py_None));
    Py_SETREF(self->guard, Py_NewRef(Py_None));
    Py_SETREF(self->graph_module, Py_NewRef(Py_None));
    return 0;
}

static void
entry_dealloc(DLCacheEntry *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->spare_fn);
    Py_CLEAR(self->check);
    Py_CLEAR(self->code);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->compile_id);
    Py_CLEAR(self->guard);
    Py_CLEAR(self->graph_module);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
entry_repr(DLCacheEntry *self)
{
    return PyUnicode_FromFormat("<dynamo_lite._C.CacheEntry %S check=%R code=%R>",
                                self->compile_id, self->check, self->code);
}

/* The parked function (tests: hits reuse one function), or None. */
static PyObject *
entry_get_function(DLCacheEntry *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->spare_fn != NULL ? self->spare_fn : Py_None);
}

static PyMemberDef entry_members[] = {
    {"check", T_OBJECT, offsetof(DLCacheEntry, check), READONLY,
     "GuardProgram, ALWAYS, or a callable check(*args, globals, func) -> True."},
    {"code", T_OBJECT, offsetof(DLCacheEntry, code), READONLY,
     "Code run in place of the frame, or None (run the original frame)."},
    {"owner", T_OBJECT, offsetof(DLCacheEntry, owner), READONLY,
     "The callback whose calls may use the entry, or None (every callback)."},
    {"compile_id", T_OBJECT, offsetof(DLCacheEntry, compile_id), READONLY,
     "'frame/n' (diagnostics) or None."},
    {"guard", T_OBJECT, offsetof(DLCacheEntry, guard), READONLY,
     "Python's CompiledGuard (explain_failure, render) or None."},
    {"graph_module", T_OBJECT, offsetof(DLCacheEntry, graph_module), READONLY,
     "The captured torch.fx.GraphModule or None."},
    {"serial", T_ULONGLONG, offsetof(DLCacheEntry, serial), READONLY,
     "Creation order (larger is newer)."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef entry_getset[] = {
    {"_function", (getter)entry_get_function, NULL,
     "The function of `code` parked between runs (None before the first).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject DLCacheEntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.CacheEntry",
    .tp_basicsize = sizeof(DLCacheEntry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "CacheEntry(check, code=None, owner=None, *, compile_id=None, "
              "guard=None, graph_module=None)\n\n"
              "One answer for a code object: when check passes on a call "
              "(and owner is None or the thread's callback), code runs in "
              "place of the frame (None: the original frame runs). "
              "Validated here, once; read-only.",
    .tp_new = entry_new,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_repr = (reprfunc)entry_repr,
    .tp_members = entry_members,
    .tp_getset = entry_getset,
};

/* ------------------------------------------------------------------------ */
/* co_extra                                                                 */
/* ------------------------------------------------------------------------ */

static void
cache_free(void *extra)
{
    Py_XDECREF((PyObject *)extra);
}

/* Store obj (new reference taken; NULL clears). CPython's set-extra calls
 * cache_free on the old value before it stores the new one, so a release
 * that ran code (an entry's finalizers, a collection) would find co_extra
 * pointing at a freed list: the old value is kept alive across the store
 * and released only once co_extra holds the new one. */
static int
cache_set(PyCodeObject *code, PyObject *obj)
{
    PyObject *old = dl_cache_get(code);
    Py_XINCREF(old);
    Py_XINCREF(obj);
    if (dl_code_set_extra((PyObject *)code, dl_cache_index, obj) < 0) {
        Py_XDECREF(obj);
        Py_XDECREF(old);
        return -1;
    }
    Py_XDECREF(old);
    return 0;
}

int
dl_cache_mark_skip(PyCodeObject *code)
{
    return cache_set(code, dl_skip_marker);
}

static int
entry_check_type(PyObject *obj)
{
    if (!Py_IS_TYPE(obj, &DLCacheEntryType)) {
        PyErr_Format(PyExc_TypeError,
                     "dynamo_lite cache entries must be _C.CacheEntry "
                     "objects, not %.200s", Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

int
dl_cache_insert(PyCodeObject *code, PyObject *obj)
{
    if (entry_check_type(obj) < 0) {
        return -1;
    }
    DLCacheEntry *entry = (DLCacheEntry *)obj;
    PyObject *list = dl_cache_get(code);
    if (list == NULL || !PyList_CheckExact(list)) {
        /* nothing yet, or SKIP: a fresh list replaces it */
        PyObject *fresh = PyList_New(1);
        if (fresh == NULL) {
            return -1;
        }
        PyList_SET_ITEM(fresh, 0, Py_NewRef(obj));
        int rc = cache_set(code, fresh);
        Py_DECREF(fresh);
        return rc;
    }
    if (entry->check != dl_always_check) {
        return PyList_Insert(list, 0, obj);
    }
    /* ALWAYS entries sit at the end (compiled entries go in front): one per
     * owner. */
    for (Py_ssize_t i = PyList_GET_SIZE(list) - 1; i >= 0; i--) {
        DLCacheEntry *e = (DLCacheEntry *)PyList_GET_ITEM(list, i);
        if (e->check != dl_always_check) {
            break;
        }
        if (e->owner == entry->owner) {
            return 0;
        }
    }
    return PyList_Append(list, obj);
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

/* Take list[index] out of the list, its reference passing to the caller
 * (no refcount changes: nothing runs while a lookup walks the list). */
static PyObject *
take_out(PyObject *list, Py_ssize_t index)
{
    PyObject **items = ((PyListObject *)list)->ob_item;
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *entry = items[index];
    memmove(&items[index], &items[index + 1],
            (size_t)(n - index - 1) * sizeof(PyObject *));
    Py_SET_SIZE(list, n - 1);
    return entry;
}

/* An entry whose GuardProgram died (an object it held weakly is gone):
 * it can never match again. */
static inline int
entry_dead(DLCacheEntry *entry)
{
    return Py_IS_TYPE(entry->check, &DLGuardProgramType) &&
           dl_guard_program_dead(entry->check);
}

#define DL_MAX_DROPPED 8

/* A raising check callable counts as a miss and is reported as unraisable;
 * a GuardProgram is run directly and only a non-Exception error (e.g.
 * KeyboardInterrupt) escapes it, which is returned as a failure. */
PyObject *
dl_cache_lookup(PyObject *list, PyObject **args, Py_ssize_t nargs,
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
    /* Entries found dead are dropped from the list and released after the
     * walk (their release may run Python code). */
    PyObject *dropped[DL_MAX_DROPPED];
    int ndropped = 0;
    Py_INCREF(list);
    PyObject *cb = dl_callback_suspend();
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        DLCacheEntry *entry = (DLCacheEntry *)PyList_GET_ITEM(list, i);
        if (entry->owner != Py_None && entry->owner != cb) {
            continue;
        }
        PyObject *check = entry->check;
        if (check == dl_always_check) {
            found = Py_NewRef(entry); /* stays where it is: last */
            break;
        }
        Py_INCREF(entry);
        if (Py_IS_TYPE(check, &DLGuardProgramType)) {
            /* The usual case: a compiled GuardProgram, run directly. */
            int r = dl_guard_program_check(check, argv, total);
            if (r > 0) {
                move_to_front(list, i, (PyObject *)entry);
                found = (PyObject *)entry; /* keeps the reference taken */
                break;
            }
            if (r == 0 && ndropped < DL_MAX_DROPPED &&
                dl_guard_program_dead(check) && i < PyList_GET_SIZE(list) &&
                PyList_GET_ITEM(list, i) == (PyObject *)entry) {
                /* (a dead program always fails: asked only then) */
                Py_DECREF(entry);
                dropped[ndropped++] = take_out(list, i--);
                continue;
            }
            Py_DECREF(entry);
            if (r < 0) {
                break; /* e.g. KeyboardInterrupt: propagates */
            }
            continue;
        }
        PyObject *ok = PyObject_Vectorcall(check, argv, nargsf, NULL);
        if (ok == NULL) {
            PyErr_WriteUnraisable(check);
        }
        else if (ok == Py_True) {
            Py_DECREF(ok);
            move_to_front(list, i, (PyObject *)entry);
            found = (PyObject *)entry; /* keeps the reference taken */
            break;
        }
        else {
            Py_DECREF(ok);
        }
        Py_DECREF(entry);
    }
    if (ndropped > 0) {
        DLSavedError saved = dl_error_save();
        while (ndropped > 0) {
            Py_DECREF(dropped[--ndropped]);
        }
        dl_error_restore(saved);
    }
    dl_callback_resume(cb);
    Py_DECREF(list);
    if (buf != small) {
        PyMem_Free(buf);
    }
    return found;
}

/* The function that runs an entry's code is made once and parked on the
 * entry between runs (see DLCacheEntry.spare_fn): a run takes it out, binds
 * it to the frame's globals, builtins and closure, calls it, and parks it
 * again if nothing else kept a reference (a traceback's frame may). So the
 * same code under other globals or closures is correct, a recursive hit
 * (the spare is out) builds a function of its own, and a hit allocates
 * nothing. */
PyObject *
dl_cache_entry_run(DLCacheEntry *entry, DLFrame *frame, PyObject **args,
                   Py_ssize_t nargs)
{
    PyObject *code = entry->code;
    PyObject *closure = PyFunction_GET_CLOSURE(dl_frame_func(frame));
    int nfree = dl_code_nfreevars((PyCodeObject *)code);
    if (nfree > 0 &&
        (closure == NULL || PyTuple_GET_SIZE(closure) != nfree)) {
        PyErr_Format(PyExc_TypeError,
                     "dynamo_lite: code %R has %d free variables but the "
                     "original function's closure has %zd cells",
                     code, nfree,
                     closure == NULL ? (Py_ssize_t)0
                                     : PyTuple_GET_SIZE(closure));
        return NULL;
    }
    PyObject *globals = dl_frame_globals(frame);
    PyObject *fn = entry->spare_fn;
    if (fn != NULL && Py_REFCNT(fn) == 1) {
        entry->spare_fn = NULL; /* ours for this run */
    }
    else {
        Py_CLEAR(entry->spare_fn); /* someone else holds it: let it go */
        fn = PyFunction_New(code, globals);
        if (fn == NULL) {
            return NULL;
        }
    }
    dl_function_rebind(fn, globals, dl_frame_builtins(frame), closure);
    /* the frame's arguments move to fn's frame: the frame we are handling
     * keeps none alive while fn runs (it is cleared unevaluated) */
    PyObject *result = dl_call_moving(fn, args, nargs);
    if (Py_REFCNT(fn) == 1) {
        /* park: keep no globals or closure alive (finalizers may run here) */
        dl_function_rebind(fn, parked_namespace, parked_namespace, NULL);
        if (entry->spare_fn == NULL) {
            entry->spare_fn = fn; /* the reference passes to the entry */
            fn = NULL;
        }
    }
    Py_XDECREF(fn);
    return result;
}

/* ------------------------------------------------------------------------ */
/* Module functions                                                         */
/* ------------------------------------------------------------------------ */

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
    PyObject *extra = dl_cache_get((PyCodeObject *)code);
    if (extra == NULL) {
        Py_RETURN_NONE;
    }
    if (PyList_CheckExact(extra)) {
        return PyList_GetSlice(extra, 0, PyList_GET_SIZE(extra));
    }
    return Py_NewRef(extra);
}

static PyObject *
dl_cache_entries(PyObject *module, PyObject *code)
{
    if (check_code(code) < 0) {
        return NULL;
    }
    PyObject *extra = dl_cache_get((PyCodeObject *)code);
    if (extra == NULL || !PyList_CheckExact(extra)) {
        return PyList_New(0);
    }
    PyObject *live = PyList_New(0);
    if (live == NULL) {
        return NULL;
    }
    Py_INCREF(extra);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(extra); i++) {
        PyObject *entry = PyList_GET_ITEM(extra, i);
        if (entry_dead((DLCacheEntry *)entry)) { /* dropped, as a lookup does */
            Py_DECREF(take_out(extra, i--));
        }
        else if (PyList_Append(live, entry) < 0) {
            Py_CLEAR(live);
            break;
        }
    }
    Py_DECREF(extra);
    return live;
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
    int rc;
    if (obj == Py_None) {
        rc = cache_set((PyCodeObject *)code, NULL);
    }
    else if (obj == dl_skip_marker) {
        rc = cache_set((PyCodeObject *)code, obj);
    }
    else if (PyList_Check(obj)) {
        /* C's own copy: later changes to obj do not reach the cache */
        PyObject *copy = PyList_GetSlice(obj, 0, PyList_GET_SIZE(obj));
        if (copy == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(copy); i++) {
            if (entry_check_type(PyList_GET_ITEM(copy, i)) < 0) {
                Py_DECREF(copy);
                return NULL;
            }
        }
        rc = cache_set((PyCodeObject *)code, copy);
        Py_DECREF(copy);
    }
    else {
        PyErr_Format(PyExc_TypeError,
                     "cache must be a list of CacheEntry, SKIP or None, "
                     "not %.200s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
dl_insert_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "insert_entry() takes exactly 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (check_code(args[0]) < 0 ||
        dl_cache_insert((PyCodeObject *)args[0], args[1]) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef cache_methods[] = {
    {"get_cache", dl_get_cache, METH_O,
     "get_cache(code) -> None, SKIP or a list (a copy) of code's CacheEntry "
     "objects, most recently hit first."},
    {"cache_entries", dl_cache_entries, METH_O,
     "cache_entries(code) -> list[CacheEntry] (a copy; empty for None or "
     "SKIP), most recently hit first."},
    {"set_cache", (PyCFunction)(void (*)(void))dl_set_cache, METH_FASTCALL,
     "set_cache(code, obj)\n\nStore a list of CacheEntry (copied), SKIP, or "
     "None (clear) on code. TypeError for anything else."},
    {"insert_entry", (PyCFunction)(void (*)(void))dl_insert_entry,
     METH_FASTCALL,
     "insert_entry(code, entry)\n\nAdd a CacheEntry as the hook adds a "
     "callback's answer: in front; an ALWAYS entry last, once per owner."},
    {NULL, NULL, 0, NULL},
};

int
dl_cache_init(PyObject *module)
{
    if (PyType_Ready(&MarkerType) < 0 || PyType_Ready(&AlwaysType) < 0 ||
        PyType_Ready(&DLCacheEntryType) < 0) {
        return -1;
    }
    if (dl_always_check == NULL &&
        (dl_always_check = PyType_GenericAlloc(&AlwaysType, 0)) == NULL) {
        return -1;
    }
    if (dl_skip_marker == NULL &&
        (dl_skip_marker = new_marker("SKIP")) == NULL) {
        return -1;
    }
    if (dl_run_eager_marker == NULL &&
        (dl_run_eager_marker = new_marker("RUN_EAGER")) == NULL) {
        return -1;
    }
    if (parked_namespace == NULL && (parked_namespace = PyDict_New()) == NULL) {
        return -1;
    }
    if (dl_cache_index < 0) {
        dl_cache_index = dl_request_code_extra_index(cache_free);
        if (dl_cache_index < 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "dynamo_lite: no free co_extra index");
            return -1;
        }
    }
    if (PyModule_AddFunctions(module, cache_methods) < 0 ||
        PyModule_AddObjectRef(module, "SKIP", dl_skip_marker) < 0 ||
        PyModule_AddObjectRef(module, "ALWAYS", dl_always_check) < 0 ||
        PyModule_AddObjectRef(module, "RUN_EAGER", dl_run_eager_marker) < 0 ||
        PyModule_AddObjectRef(module, "CacheEntry",
                              (PyObject *)&DLCacheEntryType) < 0) {
        return -1;
    }
    return 0;
}
