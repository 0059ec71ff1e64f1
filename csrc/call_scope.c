/*
 * call_scope.c -- calling a function with the hook in a given state, from C.
 *
 * Two wrapper types share one implementation:
 *   - CallWithHookOff(fn): calling it calls fn(*args, **kwargs) with this
 *     thread's callback off (disable(), a compiled graph, helpers generated
 *     code calls);
 *   - CallWithCallback(fn, callback): calls fn with `callback` as this
 *     thread's callback (a compiled function: compile(fn) returns one).
 * Either way the previous callback is restored afterwards on every path, and
 * there is no Python frame between the caller and fn (tracebacks, warnings'
 * stacklevel and sys._getframe() see the caller directly). Instances have a
 * __dict__ (functools.update_wrapper works), a settable __wrapped__, weak
 * references, and bind like functions (__get__), so they work as methods.
 *
 * Invariant: fn is a strong reference, NULL only after the GC cleared the
 * instance (a call then raises RuntimeError); callback is NULL for
 * CallWithHookOff (and for a cleared instance).
 * Tested by tests/unit/test_c_hook.py.
 */
#include "eval_frame.h"

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
} CallScopeObject;

static PyTypeObject CallWithHookOffType;
static PyTypeObject CallWithCallbackType;

/* Error for an instance whose fn was cleared by the GC. */
static PyObject *
scope_cleared(PyObject *self)
{
    PyErr_Format(PyExc_RuntimeError, "%s has been cleared",
                 Py_TYPE(self)->tp_name);
    return NULL;
}

static PyObject *
scope_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                 PyObject *kwnames)
{
    PyObject *fn = ((CallScopeObject *)self)->fn;
    if (fn == NULL) {
        return scope_cleared(self);
    }
    Py_INCREF(fn);
    PyObject *callback = ((CallScopeObject *)self)->callback;
    PyObject *cb = dl_callback_suspend();
    if (callback != NULL) {
        dl_hook_acquire(); /* released when dl_callback_resume drops it */
        dl_tls_callback = Py_NewRef(callback);
    }
    if (cb != NULL) {
        /* this thread's callback waits for the call: with the hook off for it
         * (CallWithHookOff) nothing in the call needs the hook */
        dl_hook_pause();
    }
    PyObject *result = PyObject_Vectorcall(fn, args, nargsf, kwnames);
    if (cb != NULL) {
        dl_hook_unpause();
    }
    dl_callback_resume(cb);
    Py_DECREF(fn);
    return result;
}

static PyObject *
scope_wrap(PyTypeObject *type, PyObject *fn, PyObject *callback)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError,
                     "%s() argument must be callable, not %.200s",
                     type->tp_name, Py_TYPE(fn)->tp_name);
        return NULL;
    }
    CallScopeObject *self = (CallScopeObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->fn = Py_NewRef(fn);
    self->callback = Py_XNewRef(callback);
    self->vectorcall = scope_vectorcall;
    return (PyObject *)self;
}

static PyObject *
hook_off_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fn;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "CallWithHookOff() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "CallWithHookOff", 1, 1, &fn)) {
        return NULL;
    }
    return scope_wrap(type, fn, NULL);
}

static PyObject *
with_callback_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fn, *callback;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "CallWithCallback() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "CallWithCallback", 2, 2, &fn, &callback)) {
        return NULL;
    }
    if (!PyCallable_Check(callback)) {
        PyErr_Format(PyExc_TypeError,
                     "CallWithCallback() callback must be callable, "
                     "not %.200s", Py_TYPE(callback)->tp_name);
        return NULL;
    }
    return scope_wrap(type, fn, callback);
}

static int
scope_traverse(CallScopeObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fn);
    Py_VISIT(self->dict);
    Py_VISIT(self->callback);
    return 0;
}

/* Calls of a cleared instance raise (fn is NULL). */
static int
scope_clear(CallScopeObject *self)
{
    Py_CLEAR(self->fn);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->callback);
    return 0;
}

static void
scope_dealloc(CallScopeObject *self)
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

/* Bind like a function does: CallWithHookOff(f).__get__(obj) is
 * CallWithHookOff(f.__get__(obj)), so it works as a method. */
static PyObject *
scope_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    PyObject *fn = ((CallScopeObject *)self)->fn;
    descrgetfunc get = fn == NULL ? NULL : Py_TYPE(fn)->tp_descr_get;
    if (obj == NULL || obj == Py_None || get == NULL) {
        return Py_NewRef(self);
    }
    PyObject *bound = get(fn, obj, type);
    if (bound == NULL) {
        return NULL;
    }
    PyObject *result = scope_wrap(Py_TYPE(self), bound,
                                  ((CallScopeObject *)self)->callback);
    Py_DECREF(bound);
    return result;
}

static PyObject *
scope_repr(CallScopeObject *self)
{
    if (self->fn == NULL) {
        return PyUnicode_FromFormat("<%s (cleared)>", Py_TYPE(self)->tp_name);
    }
    if (self->callback != NULL) {
        return PyUnicode_FromFormat("<dynamo_lite compiled %R>", self->fn);
    }
    return PyUnicode_FromFormat("<%s of %R>", Py_TYPE(self)->tp_name,
                                self->fn);
}

static PyObject *
scope_get_wrapped(CallScopeObject *self, void *Py_UNUSED(closure))
{
    if (self->fn == NULL) {
        return scope_cleared((PyObject *)self);
    }
    return Py_NewRef(self->fn);
}

/* Settable (to a callable) so functools.update_wrapper, which assigns
 * __wrapped__, works; it stays the function that is called. */
static int
scope_set_wrapped(CallScopeObject *self, PyObject *value,
                  void *Py_UNUSED(closure))
{
    if (value == NULL || !PyCallable_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s.__wrapped__ must be a callable",
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    Py_SETREF(self->fn, Py_NewRef(value));
    return 0;
}

static PyObject *
scope_get_callback(CallScopeObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->callback != NULL ? self->callback : Py_None);
}

/* Copies are the object itself, as for a function (copy.deepcopy of a module
 * that holds a compiled function: the EMA or teacher copy). */
static PyObject *
scope_copy(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *
scope_deepcopy(PyObject *self, PyObject *Py_UNUSED(memo))
{
    return Py_NewRef(self);
}

/* Pickled by reference, as a function is: its module and __qualname__ (set
 * by functools.update_wrapper) name it, and pickle checks that the name
 * finds this very object. */
static PyObject *
scope_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *name = NULL;
    PyObject *key = PyUnicode_FromString("__qualname__");
    if (key == NULL) {
        return NULL;
    }
    int found = dl_lookup_attr(self, key, &name);
    Py_DECREF(key);
    if (found < 0) {
        return NULL;
    }
    if (name == NULL || !PyUnicode_Check(name)) {
        Py_XDECREF(name);
        PyErr_Format(PyExc_TypeError, "cannot pickle '%s' object without "
                     "a __qualname__", Py_TYPE(self)->tp_name);
        return NULL;
    }
    return name;
}

static PyMethodDef scope_methods[] = {
    {"__copy__", scope_copy, METH_NOARGS, "The object itself."},
    {"__deepcopy__", scope_deepcopy, METH_O, "The object itself."},
    {"__reduce__", scope_reduce, METH_NOARGS,
     "Pickled by reference (module and __qualname__), as a function."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef hook_off_getset[] = {
    {"__wrapped__", (getter)scope_get_wrapped, (setter)scope_set_wrapped,
     "The wrapped callable.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef with_callback_getset[] = {
    {"__wrapped__", (getter)scope_get_wrapped, (setter)scope_set_wrapped,
     "The wrapped callable.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"callback", (getter)scope_get_callback, NULL,
     "The callback set for the call.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define DL_CALL_SCOPE_SLOTS                                                  \
    .tp_basicsize = sizeof(CallScopeObject),                                 \
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |                    \
                Py_TPFLAGS_HAVE_VECTORCALL,                                  \
    .tp_dealloc = (destructor)scope_dealloc,                                 \
    .tp_traverse = (traverseproc)scope_traverse,                             \
    .tp_clear = (inquiry)scope_clear,                                        \
    .tp_vectorcall_offset = offsetof(CallScopeObject, vectorcall),           \
    .tp_call = PyVectorcall_Call,                                            \
    .tp_descr_get = scope_descr_get,                                         \
    .tp_methods = scope_methods,                                             \
    .tp_repr = (reprfunc)scope_repr,                                         \
    .tp_dictoffset = offsetof(CallScopeObject, dict),                        \
    .tp_weaklistoffset = offsetof(CallScopeObject, weakreflist)

static PyTypeObject CallWithHookOffType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.CallWithHookOff",
    .tp_doc = "CallWithHookOff(fn): calling it calls fn(*args, **kwargs) "
              "with this thread's dynamo_lite callback off, adding no Python "
              "frame.",
    .tp_new = hook_off_new,
    .tp_getset = hook_off_getset,
    DL_CALL_SCOPE_SLOTS,
};

static PyTypeObject CallWithCallbackType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.CallWithCallback",
    .tp_doc = "CallWithCallback(fn, callback): calling it calls "
              "fn(*args, **kwargs) with callback as this thread's "
              "dynamo_lite callback (then restores the previous one), adding "
              "no Python frame.",
    .tp_new = with_callback_new,
    .tp_getset = with_callback_getset,
    DL_CALL_SCOPE_SLOTS,
};

int
dl_call_scope_init(PyObject *module)
{
    if (PyType_Ready(&CallWithHookOffType) < 0 ||
        PyType_Ready(&CallWithCallbackType) < 0) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "CallWithHookOff",
                              (PyObject *)&CallWithHookOffType) < 0 ||
        PyModule_AddObjectRef(module, "CallWithCallback",
                              (PyObject *)&CallWithCallbackType) < 0) {
        return -1;
    }
    return 0;
}
