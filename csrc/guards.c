/*
 * guards.c -- GuardProgram: the compiled guard of one cache entry, run in C.
 *
 * Role in the pipeline: dynamo_lite/guards/program.py translates the guard
 * expressions of an entry (the same expressions as the Python check it also
 * builds) into a straight-line program over registers; the hook
 * (eval_frame.c) runs it on every call of the frame before choosing the
 * entry. No Python frame is created unless the program has a residual
 * Python check (expressions program.py cannot translate).
 *
 * Registers: [0, nargs) are the frame's argument slots, nargs is the
 * frame's globals (___G), nargs + 1 the function (___F); all borrowed.
 * Registers from nargs + 2 on are written once by LOAD ops (owned) and
 * released when the run ends. Each op is (name, a, b, n, obj):
 *
 *   LOAD_CONST   a = obj
 *   LOAD_ATTR    a = getattr(reg[b], obj)        (n = 1: object.__getattribute__(
 *                reg[b], obj), the generic lookup, never a class's own
 *                __getattribute__ or __getattr__; instance __dict__ first, or the
 *                type's getset descriptor called directly, when the type's
 *                version says that is what getattr does; a function's
 *                __code__ is read from the function, raising no audit event)
 *   LOAD_ITEM    a = reg[b][obj]                 (exact dicts: no method call;
 *                n = 1: dict.__getitem__ / tuple.__getitem__ of a subclass
 *                instance, never its own __getitem__ or __missing__)
 *   (LOAD_ATTR through an instance __dict__ and LOAD_ITEM on an exact dict
 *   remember the value they found with the dict's version: an unchanged
 *   dict answers without a lookup; a 3.13 split dict, whose version does
 *   not follow its contents, the key's entry index: no hashing.)
 *   LOAD_CELL a = reg[b].__closure__[n].cell_contents   (reg[b] a function)
 *   LOAD_TYPE    a = type(reg[b])
 *   LOAD_CALL0   a = reg[b]()
 *   LOAD_SIZE    a = reg[b].size(n)   (int; the C++ reader when reg[b]'s type
 *   LOAD_STRIDE  a = reg[b].stride(n)  is obj, else attribute reads)
 *   LOAD_TORCH_STATE  a = torch's thread-local state n (DL_STATE_*,
 *                tensor_meta.h), read by the C++ reader with no Python: a
 *                bool, a stack length, or None / True (another tracer is
 *                off / on); without a registered reader the run fails.
 *                torch.fx's tracing flag (FX_TRACING) is read here, from
 *                where _set_fx_tracing_flag() said, with no call
 *   CHECK_TYPE   type(reg[a]) is obj
 *   CHECK_ID     reg[a] is obj
 *                (n = 1: obj is a weakref.ref to the object; the program
 *                holds it weakly: see "Weakly held objects" below; also
 *                LOAD_CONST with n = 1)
 *   CHECK_NOT_ID reg[a] is not obj
 *   CHECK_SAME   reg[a] is reg[b]
 *   CHECK_EQ     bool(reg[a] == obj)              (no identity shortcut,
 *   CHECK_NE     bool(reg[a] != obj)               exactly Python's ==)
 *   CHECK_LEN    len(reg[a]) == n
 *   CHECK_KEYS   list(reg[a].keys()) == obj       (obj a list; an exact set or
 *                frozenset: list(reg[a]) == obj, its iteration order)
 *   CHECK_IN     obj in reg[a]
 *   CHECK_NOT_IN obj not in reg[a]
 *   CHECK_TRUTHY bool(reg[a])
 *   CHECK_FALSY  not reg[a]
 *   CHECK_TENSOR reg[a] is a tensor of exactly the type, dtype, device,
 *                sizes, strides and requires_grad in obj = (type, dtype,
 *                device, sizes, strides, requires_grad, codes or None);
 *                an expected size or stride of -1 (symbolic in the graph)
 *                matches any value (the shape guards check it)
 *   CHECK_INT_RANGE  n <= reg[a] <= obj     (reg[a] an int; obj an int)
 *   CHECK_INT_EQ     reg[a] == reg[b]       (both ints)
 *   CHECK_INT_EXPR   obj, a postfix program of (code, arg) pairs over ints,
 *                leaves a true value: code 0 pushes int(reg[arg]), 1 pushes
 *                arg, 2.. apply + * // % ** max min == != < <= > >= and or
 *                (arg operands) and not (codes: guards/kinds.py EXPR_CODES);
 *                Python's int semantics (floor division and modulo), an
 *                overflow of int64 fails the check (the entry recompiles)
 *   CHECK_CLASS_LACKS  no class in type(reg[a]).__mro__ has any of the
 *                names in obj (a tuple of str) in its __dict__ (the type
 *                lookup CPython's attribute reads make, through its method
 *                cache: no metaclass or user code runs)
 *   CHECK_NOT_HASATTR  not hasattr(reg[a], obj)  (obj a str; the lookup
 *                builtins.hasattr makes, the class's own getattr included)
 *   CHECK_DISTINCT  the registers in obj[0] (a tuple of register numbers)
 *                hold pairwise different objects, none of whose id() is in
 *                obj[1] (a frozenset of ints)
 *
 * Semantics equal the Python expressions evaluated left to right with
 * `and`: ops run in order, the first failing check ends the run (so later
 * loads never happen), an Exception raised by a load or a check means
 * "guard failed" (cleared), any other BaseException propagates.
 *
 * CHECK_TENSOR uses the C++ reader of dynamo_lite._tensor_meta when it was
 * registered with _set_tensor_api() and codes is not None (program.py only
 * gives codes for types whose metadata getters are torch's own); otherwise
 * it reads the dtype, shape, stride(), requires_grad and device attributes.
 *
 * Weakly held objects: a guard must not keep a user's model (or any object
 * it only compares by identity) alive. For an op given a weakref.ref with
 * n = 1, the program keeps a borrowed pointer to the referent and a weak
 * reference of its own whose callback is the program's DeathNotice. When any
 * such object dies the notice is set (in the callback, before its memory can
 * be reused) and every later run fails at once, so a new object at the old
 * address can never pass; the cache drops an entry whose program died
 * (csrc/cache_entry.c).
 *
 * Invariants: construction validates every register index and that each
 * register is loaded before it is read, so a run never reads an unset
 * register. After tp_clear (GC) a program has no ops and always fails.
 * Tested by tests/unit/test_guards.py.
 */
#include "cpython_compat.h"
#include "guards.h"
#include "tensor_meta.h"

#include <stddef.h>
#include <string.h>

#define DL_SMALL_REGS 64

enum {
    OP_LOAD_CONST,
    OP_LOAD_ATTR,
    OP_LOAD_ITEM,
    OP_LOAD_CELL,
    OP_LOAD_TYPE,
    OP_LOAD_CALL0,
    OP_LOAD_SIZE,
    OP_LOAD_STRIDE,
    OP_LOAD_TORCH_STATE,
    OP_FIRST_CHECK, /* ops from here on are checks */
    OP_CHECK_TYPE = OP_FIRST_CHECK,
    OP_CHECK_ID,
    OP_CHECK_NOT_ID,
    OP_CHECK_SAME,
    OP_CHECK_EQ,
    OP_CHECK_NE,
    OP_CHECK_LEN,
    OP_CHECK_KEYS,
    OP_CHECK_IN,
    OP_CHECK_NOT_IN,
    OP_CHECK_TRUTHY,
    OP_CHECK_FALSY,
    OP_CHECK_TENSOR,
    OP_CHECK_INT_RANGE,
    OP_CHECK_INT_EQ,
    OP_CHECK_INT_EXPR,
    OP_CHECK_CLASS_LACKS,
    OP_CHECK_NOT_HASATTR,
    OP_CHECK_DISTINCT,
    OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    [OP_LOAD_CONST] = "LOAD_CONST",
    [OP_LOAD_ATTR] = "LOAD_ATTR",
    [OP_LOAD_ITEM] = "LOAD_ITEM",
    [OP_LOAD_CELL] = "LOAD_CELL",
    [OP_LOAD_TYPE] = "LOAD_TYPE",
    [OP_LOAD_CALL0] = "LOAD_CALL0",
    [OP_LOAD_SIZE] = "LOAD_SIZE",
    [OP_LOAD_STRIDE] = "LOAD_STRIDE",
    [OP_LOAD_TORCH_STATE] = "LOAD_TORCH_STATE",
    [OP_CHECK_TYPE] = "CHECK_TYPE",
    [OP_CHECK_ID] = "CHECK_ID",
    [OP_CHECK_NOT_ID] = "CHECK_NOT_ID",
    [OP_CHECK_SAME] = "CHECK_SAME",
    [OP_CHECK_EQ] = "CHECK_EQ",
    [OP_CHECK_NE] = "CHECK_NE",
    [OP_CHECK_LEN] = "CHECK_LEN",
    [OP_CHECK_KEYS] = "CHECK_KEYS",
    [OP_CHECK_IN] = "CHECK_IN",
    [OP_CHECK_NOT_IN] = "CHECK_NOT_IN",
    [OP_CHECK_TRUTHY] = "CHECK_TRUTHY",
    [OP_CHECK_FALSY] = "CHECK_FALSY",
    [OP_CHECK_TENSOR] = "CHECK_TENSOR",
    [OP_CHECK_INT_RANGE] = "CHECK_INT_RANGE",
    [OP_CHECK_INT_EQ] = "CHECK_INT_EQ",
    [OP_CHECK_INT_EXPR] = "CHECK_INT_EXPR",
    [OP_CHECK_CLASS_LACKS] = "CHECK_CLASS_LACKS",
    [OP_CHECK_NOT_HASATTR] = "CHECK_NOT_HASATTR",
    [OP_CHECK_DISTINCT] = "CHECK_DISTINCT",
};

/* What CHECK_TENSOR expects (owned by its op). */
typedef struct {
    PyObject *dtype;        /* strong */
    PyObject *device;       /* strong */
    PyObject *sizes_obj;    /* strong: the expected sizes tuple */
    PyObject *strides_obj;  /* strong: the expected strides tuple */
    int fast;               /* expect holds valid codes */
    DLTensorExpect expect;  /* sizes/strides point into `dims` */
    int64_t dims[];         /* ndim sizes, then ndim strides */
} TensorSpec;

typedef struct {
    int op;
    int a;
    int b;
    Py_ssize_t n;
    PyObject *obj;          /* strong or NULL */
    TensorSpec *spec;       /* CHECK_TENSOR only (PyMem) */
    int64_t *expr;          /* CHECK_INT_EXPR (PyMem): code, arg pairs;
                               CHECK_DISTINCT: its register numbers */
    Py_ssize_t expr_len;    /* number of pairs (registers) */
    int64_t hi;             /* CHECK_INT_RANGE: the upper bound */
    /* LOAD_ATTR only: instances of cache_type (strong or NULL) whose type
     * version is cache_version look the attribute up in their __dict__
     * first (no data descriptor, default __getattribute__). */
    PyTypeObject *cache_type;
    unsigned int cache_version;
    /* ... or, when not NULL (strong), the attribute is this getset data
     * descriptor of cache_type: its getter is called directly. */
    PyObject *cache_descr;
    /* LOAD_ATTR (instance __dict__ path) and LOAD_ITEM (exact dicts): the
     * value (borrowed) found in the dict whose version was dict_version.
     * An equal version means the same dict, unchanged, so it still holds
     * a reference to dict_value. 0 = empty. */
    uint64_t dict_version;
    PyObject *dict_value;
    /* ... and, for a dict whose version does not follow its contents (a
     * 3.13 split dict: see dl_dict_slot_value), the entry index of the key
     * in its keys and that entry's key object (strong or NULL). */
    Py_ssize_t slot_index;
    PyObject *slot_key;
    /* An op given a weakref (n = 1): obj is borrowed, and this weak
     * reference (strong; its callback the program's notice) watches it. */
    PyObject *watch;
} GuardOp;

/* Set (dead = 1) by the weak references of a program's weakly held objects
 * when one of them dies: the program then fails every run. */
typedef struct {
    PyObject_HEAD
    int dead;
} DeathNotice;

static PyObject *
notice_call(DeathNotice *self, PyObject *Py_UNUSED(args),
            PyObject *Py_UNUSED(kwds))
{
    self->dead = 1;
    Py_RETURN_NONE;
}

static PyTypeObject DeathNoticeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.DeathNotice",
    .tp_basicsize = sizeof(DeathNotice),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Called by a weak reference when a guarded object dies.",
    .tp_call = (ternaryfunc)notice_call,
    .tp_new = NULL,
};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t nargs;       /* argument registers incl. globals and func */
    Py_ssize_t nregs;
    Py_ssize_t nops;
    GuardOp *ops;           /* PyMem array of nops */
    PyObject *residual;     /* callable(*args) -> True to pass, or NULL */
    PyObject *description;  /* the ops as given (tuple) */
    DeathNotice *notice;    /* strong, or NULL: no weakly held object */
    PyObject *weakreflist;
} GuardProgram;

/* The registered C++ tensor reader (NULL: attribute reads). */
static const DLTensorAPI *tensor_api = NULL;
static PyObject *tensor_api_capsule = NULL; /* keeps it alive */

static PyObject *str_dtype, *str_shape, *str_stride, *str_requires_grad,
    *str_device, *str_keys, *str_getattribute;
/* object.__getattribute__ (borrowed from object's type dict). */
static PyObject *object_getattribute = NULL;
/* The function type's __code__ getset descriptor (strong). */
static PyObject *function_code_descr = NULL;

/* ------------------------------------------------------------------------ */
/* Tensor checks                                                            */
/* ------------------------------------------------------------------------ */

/* 1 if `seq` (a tuple of exact ints, the usual case) equals dims[0..n),
 * where an expected -1 (a symbolic size or stride) matches any value;
 * otherwise falls back to seq == expected (item by item when there is a
 * -1: each item is read with operator.index). */
static int
int_tuple_equals(PyObject *seq, const int64_t *dims, Py_ssize_t n,
                 PyObject *expected)
{
    int wild = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        wild |= dims[i] == -1;
    }
    if (PyTuple_Check(seq)) {
        if (PyTuple_GET_SIZE(seq) != n) {
            return 0;
        }
        Py_ssize_t i;
        for (i = 0; i < n; i++) {
            PyObject *item = PyTuple_GET_ITEM(seq, i);
            if (!PyLong_CheckExact(item)) {
                break;
            }
            if (dims[i] == -1) {
                continue;
            }
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
            if (overflow || v != dims[i]) {
                return 0;
            }
        }
        if (i == n) {
            return 1;
        }
    }
    if (wild) {
        Py_ssize_t len = PySequence_Size(seq);
        if (len < 0) {
            return -1;
        }
        if (len != n) {
            return 0;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PySequence_GetItem(seq, i);
            if (item == NULL) {
                return -1;
            }
            PyObject *index = PyNumber_Index(item);
            Py_DECREF(item);
            if (index == NULL) {
                return -1;
            }
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
            Py_DECREF(index);
            if (dims[i] != -1 && (overflow || v != dims[i])) {
                return 0;
            }
        }
        return 1;
    }
    PyObject *res = PyObject_RichCompare(seq, expected, Py_EQ);
    if (res == NULL) {
        return -1;
    }
    int ok = PyObject_IsTrue(res);
    Py_DECREF(res);
    return ok;
}

/* The tensor's attributes, read as Python reads them. */
static int
tensor_check_attrs(PyObject *t, const TensorSpec *s)
{
    int ok;
    PyObject *v = PyObject_GetAttr(t, str_dtype);
    if (v == NULL) {
        return -1;
    }
    ok = v == s->dtype;
    Py_DECREF(v);
    if (!ok) {
        return 0;
    }
    v = PyObject_GetAttr(t, str_shape);
    if (v == NULL) {
        return -1;
    }
    ok = int_tuple_equals(v, s->dims, s->expect.ndim, s->sizes_obj);
    Py_DECREF(v);
    if (ok != 1) {
        return ok;
    }
    v = PyObject_CallMethodNoArgs(t, str_stride);
    if (v == NULL) {
        return -1;
    }
    ok = int_tuple_equals(v, s->dims + s->expect.ndim, s->expect.ndim,
                          s->strides_obj);
    Py_DECREF(v);
    if (ok != 1) {
        return ok;
    }
    v = PyObject_GetAttr(t, str_requires_grad);
    if (v == NULL) {
        return -1;
    }
    ok = v == (s->expect.requires_grad ? Py_True : Py_False);
    Py_DECREF(v);
    if (!ok) {
        return 0;
    }
    v = PyObject_GetAttr(t, str_device);
    if (v == NULL) {
        return -1;
    }
    ok = PyObject_RichCompareBool(v, s->device, Py_EQ);
    Py_DECREF(v);
    return ok;
}

static inline int
tensor_check(PyObject *t, PyObject *type, const TensorSpec *s)
{
    if ((PyObject *)Py_TYPE(t) != type) {
        return 0;
    }
    if (s->fast && tensor_api != NULL) {
        int r = tensor_api->check(t, &s->expect);
        if (r >= 0) {
            return r;
        }
    }
    return tensor_check_attrs(t, s);
}

/* Build a TensorSpec from (type, dtype, device, sizes, strides,
 * requires_grad, codes or None); NULL with an error on bad input. */
static TensorSpec *
tensor_spec_new(PyObject *desc)
{
    PyObject *type, *dtype, *device, *sizes, *strides, *rg, *codes;
    if (!PyTuple_Check(desc) ||
        !PyArg_UnpackTuple(desc, "tensor spec", 7, 7, &type, &dtype, &device,
                           &sizes, &strides, &rg, &codes)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "tensor spec must be a tuple");
        }
        return NULL;
    }
    if (!PyType_Check(type) || !PyTuple_Check(sizes) ||
        !PyTuple_Check(strides) ||
        PyTuple_GET_SIZE(sizes) != PyTuple_GET_SIZE(strides)) {
        PyErr_SetString(PyExc_TypeError,
                        "tensor spec: (type, dtype, device, sizes tuple, "
                        "strides tuple of the same length, requires_grad, "
                        "codes)");
        return NULL;
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(sizes);
    if (ndim > INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "tensor spec: too many dims");
        return NULL;
    }
    TensorSpec *s = PyMem_Calloc(1, sizeof(TensorSpec) +
                                        2 * (size_t)ndim * sizeof(int64_t));
    if (s == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < ndim; i++) {
        s->dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(sizes, i));
        s->dims[ndim + i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
    }
    int req = PyObject_IsTrue(rg);
    if (PyErr_Occurred() || req < 0) {
        PyMem_Free(s);
        return NULL;
    }
    s->expect.ndim = (int)ndim;
    s->expect.sizes = s->dims;
    s->expect.strides = s->dims + ndim;
    s->expect.requires_grad = req;
    if (codes != Py_None) {
        if (!PyArg_ParseTuple(codes, "iii;tensor spec codes",
                              &s->expect.scalar_type, &s->expect.device_type,
                              &s->expect.device_index)) {
            PyMem_Free(s);
            return NULL;
        }
        s->fast = 1;
    }
    Py_INCREF(dtype);
    s->dtype = dtype;
    Py_INCREF(device);
    s->device = device;
    Py_INCREF(sizes);
    s->sizes_obj = sizes;
    Py_INCREF(strides);
    s->strides_obj = strides;
    return s;
}

static void
tensor_spec_free(TensorSpec *s)
{
    if (s == NULL) {
        return;
    }
    Py_XDECREF(s->dtype);
    Py_XDECREF(s->device);
    Py_XDECREF(s->sizes_obj);
    Py_XDECREF(s->strides_obj);
    PyMem_Free(s);
}

/* ------------------------------------------------------------------------ */
/* Running a program                                                        */
/* ------------------------------------------------------------------------ */

/* bool(a <op> b) exactly as Python evaluates it (no identity shortcut). */
static inline int
compare_true(PyObject *a, PyObject *b, int op)
{
    if ((op == Py_EQ || op == Py_NE) && PyLong_CheckExact(a) &&
        PyLong_CheckExact(b)) {
        /* int's own ==, no user code (the stack lengths every program
         * checks): compare the values when both fit */
        int oa = 0, ob = 0;
        long long x = PyLong_AsLongLongAndOverflow(a, &oa);
        long long y = PyLong_AsLongLongAndOverflow(b, &ob);
        if (!oa && !ob) {
            return (x == y) == (op == Py_EQ);
        }
    }
    PyObject *res = PyObject_RichCompare(a, b, op);
    if (res == NULL) {
        return -1;
    }
    int ok = res == Py_True ? 1 : res == Py_False ? 0 : PyObject_IsTrue(res);
    Py_DECREF(res);
    return ok;
}

/* Remember that instances of tp find op->obj by the generic rule "data
 * descriptor of the type, else instance __dict__, else ..." with no data
 * descriptor of that name: then a hit in the instance __dict__ is the
 * answer getattr() gives. */
static void
attr_cache_fill(GuardOp *op, PyTypeObject *tp)
{
    if (op->n != 1 && tp->tp_getattro != PyObject_GenericGetAttr &&
        _PyType_Lookup(tp, str_getattribute) != object_getattribute) {
        return; /* a custom __getattribute__ (or C getattro) */
    }
    if (tp->tp_dictoffset == 0) {
        return;
    }
    PyObject *descr = _PyType_Lookup(tp, op->obj);
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL &&
        !Py_IS_TYPE(descr, &PyGetSetDescr_Type)) {
        return; /* a data descriptor wins over the instance dict */
    }
    unsigned int version = dl_type_version(tp);
    if (version == 0) {
        return;
    }
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
        Py_INCREF(descr); /* a getset (e.g. __dict__): what getattr calls */
        Py_XSETREF(op->cache_descr, descr);
    }
    else {
        Py_CLEAR(op->cache_descr);
    }
    Py_INCREF(tp);
    Py_XSETREF(op->cache_type, tp);
    op->cache_version = version;
}

/* dict[op->obj] (new reference) for an exact dict or an instance __dict__,
 * through the op's version cache, or, for a dict whose version does not
 * follow its contents (dl_dict_version_follows_contents), through the
 * remembered entry index of the key (dl_dict_slot_value: no hashing, the
 * value read as it is now); NULL without an error when missing. */
static inline PyObject *
dict_lookup_cached(GuardOp *op, PyObject *dict)
{
    if (!dl_dict_version_follows_contents(dict)) {
        PyObject *v;
#if DL_HAVE_DICT_SLOTS
        if (op->slot_key != NULL &&
            dl_dict_slot_value(dict, op->slot_index, op->slot_key, &v) &&
            v != NULL) {
            Py_INCREF(v);
            return v;
        }
#endif
        v = PyDict_GetItemWithError(dict, op->obj);
        if (v == NULL) {
            return NULL;
        }
        Py_INCREF(v);
#if DL_HAVE_DICT_SLOTS
        PyObject *key = NULL;
        Py_ssize_t ix = dl_dict_slot_find(dict, op->obj, &key);
        PyObject *at;
        if (ix >= 0 && dl_dict_slot_value(dict, ix, key, &at) && at == v) {
            Py_INCREF(key);
            Py_XSETREF(op->slot_key, key);
            op->slot_index = ix;
        }
#endif
        return v;
    }
    uint64_t version = dl_dict_version(dict);
    if (version != 0 && version == op->dict_version) {
        Py_INCREF(op->dict_value);
        return op->dict_value;
    }
    PyObject *v = PyDict_GetItemWithError(dict, op->obj);
    if (v != NULL) {
        op->dict_version = version;
        op->dict_value = v;
        Py_INCREF(v);
    }
    return v;
}

/* The lookup itself: the generic one (object.__getattribute__) for n = 1. */
static inline PyObject *
load_attr_uncached(GuardOp *op, PyObject *obj)
{
    return op->n == 1 ? PyObject_GenericGetAttr(obj, op->obj)
                      : PyObject_GetAttr(obj, op->obj);
}

/* getattr(obj, op->obj), reading the instance __dict__ directly when the
 * op's cache says that is what getattr would do. */
static PyObject *
load_attr(GuardOp *op, PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp != op->cache_type || dl_type_version(tp) != op->cache_version) {
        attr_cache_fill(op, tp);
    }
    if (tp == op->cache_type && dl_type_version(tp) == op->cache_version) {
        if (op->cache_descr == function_code_descr) {
            /* fn.__code__ of a function (the type is exact: function is
             * not subclassable): its code, read directly. The getter would
             * also raise the audit event "object.__getattr__", and so run
             * every sys.addaudithook hook of the process (filelock adds
             * one on 3.12+) on each call of the entry, where eager raises
             * none: a guard is not the user's code reading __code__. */
            PyObject *code = PyFunction_GET_CODE(obj);
            Py_INCREF(code);
            return code;
        }
        if (op->cache_descr != NULL) {
            PyGetSetDef *gs = ((PyGetSetDescrObject *)op->cache_descr)->d_getset;
            if (gs->get != NULL) {
                PyObject *v = gs->get(obj, gs->closure);
                if (v != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) {
                    return v;
                }
                PyErr_Clear(); /* getattr would now try __getattr__: let it */
            }
            return load_attr_uncached(op, obj);
        }
        PyObject *dict = dl_instance_dict(obj);
        if (dict != NULL) {
            PyObject *v = dict_lookup_cached(op, dict);
            if (v != NULL || PyErr_Occurred()) {
                return v;
            }
        }
    }
    return load_attr_uncached(op, obj);
}

static PyObject *
load_item(GuardOp *op, PyObject *container)
{
    if (PyDict_CheckExact(container) || (op->n == 1 && PyDict_Check(container))) {
        PyObject *v = dict_lookup_cached(op, container);
        if (v == NULL && !PyErr_Occurred()) {
            PyErr_SetObject(PyExc_KeyError, op->obj);
        }
        return v;
    }
    if (op->n == 1) {
        /* tuple.__getitem__(container, index) (an int key: parse_op) */
        if (!PyTuple_Check(container)) {
            return PyErr_Format(PyExc_TypeError, "not a dict or tuple");
        }
        Py_ssize_t i = PyLong_AsSsize_t(op->obj);
        if (i == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (i < 0) {
            i += PyTuple_GET_SIZE(container);
        }
        if (i < 0 || i >= PyTuple_GET_SIZE(container)) {
            return PyErr_Format(PyExc_IndexError, "tuple index out of range");
        }
        PyObject *v = PyTuple_GET_ITEM(container, i);
        Py_INCREF(v);
        return v;
    }
    return PyObject_GetItem(container, op->obj);
}

/* CHECK_NOT_HASATTR: 1 when obj has no attribute name (hasattr() False). */
static int
check_not_hasattr(PyObject *obj, PyObject *name)
{
    PyObject *found;
    int r = dl_lookup_attr(obj, name, &found);
    if (r < 0) {
        return -1;
    }
    Py_XDECREF(found);
    return !r;
}

/* CHECK_DISTINCT: 1 when the op's registers hold different objects whose
 * ids are not in the frozenset op->obj[1]. */
static int
check_distinct(GuardOp *op, PyObject **regs)
{
    PyObject *fixed = PyTuple_GET_ITEM(op->obj, 1);
    for (Py_ssize_t i = 0; i < op->expr_len; i++) {
        PyObject *v = regs[op->expr[i]];
        for (Py_ssize_t j = 0; j < i; j++) {
            if (regs[op->expr[j]] == v) {
                return 0;
            }
        }
        if (PySet_GET_SIZE(fixed) > 0) {
            PyObject *id = PyLong_FromVoidPtr(v);
            if (id == NULL) {
                return -1;
            }
            int in = PySet_Contains(fixed, id);
            Py_DECREF(id);
            if (in != 0) {
                return in < 0 ? -1 : 0;
            }
        }
    }
    return 1;
}

static PyObject *
load_closure(PyObject *func, Py_ssize_t index)
{
    if (!PyFunction_Check(func)) {
        return PyErr_Format(PyExc_TypeError, "not a function");
    }
    PyObject *closure = PyFunction_GET_CLOSURE(func);
    if (closure == NULL || !PyTuple_Check(closure) ||
        index >= PyTuple_GET_SIZE(closure)) {
        return PyErr_Format(PyExc_IndexError, "no closure cell %zd", index);
    }
    PyObject *cell = PyTuple_GET_ITEM(closure, index);
    PyObject *v = PyCell_Check(cell) ? PyCell_GET(cell) : NULL;
    if (v == NULL) {
        return PyErr_Format(PyExc_ValueError, "Cell is empty");
    }
    Py_INCREF(v);
    return v;
}

static int
check_keys(PyObject *mapping, PyObject *expected)
{
    if (PyDict_CheckExact(mapping) && PyList_CheckExact(expected)) {
        Py_ssize_t n = PyList_GET_SIZE(expected);
        if (PyDict_GET_SIZE(mapping) != n) {
            return 0;
        }
        Py_ssize_t pos = 0, i = 0;
        PyObject *key, *value;
        while (PyDict_Next(mapping, &pos, &key, &value)) {
            PyObject *want = PyList_GET_ITEM(expected, i++);
            if (key != want) {
                Py_INCREF(key);
                Py_INCREF(want);
                int eq = compare_true(key, want, Py_EQ);
                Py_DECREF(key);
                Py_DECREF(want);
                if (eq != 1) {
                    return eq;
                }
            }
        }
        return 1;
    }
    if (PyAnySet_CheckExact(mapping) && PyList_CheckExact(expected)) {
        /* the table's order against the expected one, element by element: no list made */
        Py_ssize_t n = PyList_GET_SIZE(expected);
        if (PySet_GET_SIZE(mapping) != n) {
            return 0;
        }
        Py_ssize_t pos = 0, i = 0;
        PyObject *key;
        while (i < n && dl_set_next(mapping, &pos, &key)) {
            PyObject *want = PyList_GET_ITEM(expected, i++);
            if (key != want) {
                Py_INCREF(key);
                Py_INCREF(want);
                int eq = compare_true(key, want, Py_EQ);
                Py_DECREF(key);
                Py_DECREF(want);
                if (eq != 1) {
                    return eq;
                }
            }
        }
        return i == n;
    }
    PyObject *list;
    if (PyAnySet_CheckExact(mapping)) {
        list = PySequence_List(mapping); /* (walks the table: no user code) */
    }
    else {
        PyObject *keys = PyObject_CallMethodNoArgs(mapping, str_keys);
        if (keys == NULL) {
            return -1;
        }
        list = PySequence_List(keys);
        Py_DECREF(keys);
    }
    if (list == NULL) {
        return -1;
    }
    int ok = compare_true(list, expected, Py_EQ);
    Py_DECREF(list);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Integer checks (dynamic shapes)                                          */
/* ------------------------------------------------------------------------ */

/* reg[b].size(n) or .stride(n) as a new int; NULL with an error. */
static PyObject *
load_dim(PyObject *t, Py_ssize_t n, int stride, PyObject *fast_type)
{
    if (tensor_api != NULL && fast_type != Py_None &&
        (PyObject *)Py_TYPE(t) == fast_type) {
        int64_t v;
        if (tensor_api->dim(t, (int)n, stride, &v) == 1) {
            return PyLong_FromLongLong(v);
        }
    }
    PyObject *seq = stride ? PyObject_CallMethodNoArgs(t, str_stride)
                           : PyObject_GetAttr(t, str_shape);
    if (seq == NULL) {
        return NULL;
    }
    PyObject *item = PySequence_GetItem(seq, n);
    Py_DECREF(seq);
    if (item == NULL) {
        return NULL;
    }
    PyObject *index = PyNumber_Index(item);
    Py_DECREF(item);
    return index;
}

/* An exact int (not bool) as int64: 1 ok, 0 not an int or too large. */
static int
int_value(PyObject *v, int64_t *out)
{
    if (!PyLong_Check(v) || PyBool_Check(v)) {
        return 0;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)x;
    return 1;
}

static int
check_int_range(PyObject *v, int64_t lo, int64_t hi)
{
    int64_t x;
    return int_value(v, &x) && lo <= x && x <= hi;
}

enum { EX_REG, EX_INT, EX_ADD, EX_MUL, EX_FLOORDIV, EX_MOD, EX_POW, EX_MAX,
       EX_MIN, EX_EQ, EX_NE, EX_LT, EX_LE, EX_GT, EX_GE, EX_AND, EX_OR,
       EX_NOT, EX_COUNT };

/* Python's a // b and a % b for int64 (b != 0); 0 on overflow. */
static int
py_divmod(int64_t a, int64_t b, int64_t *q, int64_t *r)
{
    if (b == 0 || (a == INT64_MIN && b == -1)) {
        return 0;
    }
    int64_t qq = a / b, rr = a % b;
    if (rr != 0 && ((rr < 0) != (b < 0))) {
        qq -= 1;
        rr += b;
    }
    *q = qq;
    *r = rr;
    return 1;
}

/* 1: the expression is true, 0: false or not computable in int64. */
static int
check_int_expr(const GuardOp *op, PyObject **regs)
{
    int64_t small[16];
    int64_t *st = small;
    Py_ssize_t n = op->expr_len;
    if (n > 16) {
        st = PyMem_Malloc((size_t)n * sizeof(int64_t));
        if (st == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    Py_ssize_t sp = 0;
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        int64_t code = op->expr[2 * i], arg = op->expr[2 * i + 1];
        if (code == EX_REG) {
            ok = int_value(regs[arg], &st[sp++]);
            continue;
        }
        if (code == EX_INT) {
            st[sp++] = arg;
            continue;
        }
        if (code == EX_NOT) {
            st[sp - 1] = !st[sp - 1];
            continue;
        }
        /* an n-ary operator over the top `arg` values, folded left to right */
        int64_t acc = st[sp - arg];
        for (int64_t k = 1; k < arg && ok; k++) {
            int64_t b = st[sp - arg + k], q = 0, r = 0;
            switch (code) {
            case EX_ADD: ok = !__builtin_add_overflow(acc, b, &acc); break;
            case EX_MUL: ok = !__builtin_mul_overflow(acc, b, &acc); break;
            case EX_FLOORDIV: ok = py_divmod(acc, b, &q, &r); acc = q; break;
            case EX_MOD: ok = py_divmod(acc, b, &q, &r); acc = r; break;
            case EX_POW: {
                int64_t result = 1;
                if (b < 0) { ok = 0; break; }
                for (int64_t e = 0; e < b && ok; e++) {
                    ok = !__builtin_mul_overflow(result, acc, &result);
                }
                acc = result;
                break;
            }
            case EX_MAX: acc = acc > b ? acc : b; break;
            case EX_MIN: acc = acc < b ? acc : b; break;
            case EX_EQ: acc = acc == b; break;
            case EX_NE: acc = acc != b; break;
            case EX_LT: acc = acc < b; break;
            case EX_LE: acc = acc <= b; break;
            case EX_GT: acc = acc > b; break;
            case EX_GE: acc = acc >= b; break;
            case EX_AND: acc = acc && b; break;
            case EX_OR: acc = acc || b; break;
            default: ok = 0;
            }
        }
        sp -= arg;
        st[sp++] = acc;
    }
    ok = ok && sp == 1 && st[0] != 0;
    if (st != small) {
        PyMem_Free(st);
    }
    return ok;
}

/* Is obj a tuple of str (CHECK_CLASS_LACKS's names)? */
static int
all_str(PyObject *obj)
{
    if (!PyTuple_Check(obj)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(obj, i))) {
            return 0;
        }
    }
    return 1;
}

/* CHECK_CLASS_LACKS: 1 when no class in tp's MRO defines any of names. */
static int
class_lacks(PyTypeObject *tp, PyObject *names)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        if (dl_type_lookup(tp, PyTuple_GET_ITEM(names, i)) != NULL) {
            return 0;
        }
    }
    return 1;
}

/* Parse CHECK_DISTINCT's (registers, frozenset of ids); registers must be
 * loaded. 0 or -1. */
static int
parse_distinct(GuardOp *out, PyObject *obj, Py_ssize_t nregs, const char *defined)
{
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2 ||
        !PyTuple_Check(PyTuple_GET_ITEM(obj, 0)) ||
        !PyFrozenSet_CheckExact(PyTuple_GET_ITEM(obj, 1))) {
        PyErr_SetString(PyExc_TypeError,
                        "CHECK_DISTINCT: a (registers tuple, frozenset) pair");
        return -1;
    }
    PyObject *regs = PyTuple_GET_ITEM(obj, 0);
    Py_ssize_t n = PyTuple_GET_SIZE(regs);
    out->expr = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    if (out->expr == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->expr_len = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyTuple_GET_ITEM(regs, i));
        if (r == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (r < 0 || r >= nregs || !defined[r]) {
            PyErr_Format(PyExc_ValueError, "CHECK_DISTINCT: register %zd read before it is loaded", r);
            return -1;
        }
        out->expr[i] = r;
    }
    return 0;
}

/* Parse CHECK_INT_EXPR's program; registers must be loaded. 0 or -1. */
static int
parse_int_expr(GuardOp *out, PyObject *obj, Py_ssize_t nregs,
               const char *defined)
{
    if (!PyTuple_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "CHECK_INT_EXPR: a tuple of pairs");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(obj);
    out->expr = PyMem_Calloc((size_t)(n > 0 ? 2 * n : 1), sizeof(int64_t));
    if (out->expr == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    out->expr_len = n;
    Py_ssize_t depth = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long code, arg;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(obj, i), "LL;CHECK_INT_EXPR pair",
                              &code, &arg)) {
            return -1;
        }
        if (code < 0 || code >= EX_COUNT ||
            (code == EX_REG && (arg < 0 || arg >= nregs || !defined[arg])) ||
            (code > EX_INT && code != EX_NOT && (arg < 1 || arg > depth)) ||
            (code == EX_NOT && depth < 1)) {
            PyErr_Format(PyExc_ValueError, "CHECK_INT_EXPR: bad pair %zd", i);
            return -1;
        }
        depth += (code <= EX_INT) ? 1 : (code == EX_NOT ? 0 : 1 - arg);
        out->expr[2 * i] = code;
        out->expr[2 * i + 1] = arg;
    }
    if (depth != 1) {
        PyErr_SetString(PyExc_ValueError, "CHECK_INT_EXPR: unbalanced program");
        return -1;
    }
    return 0;
}

PyObject *
dl_thread_local_get(PyObject *local, PyObject *name, PyObject *dflt)
{
    static PyObject *dict_name = NULL; /* "__dict__", interned once */
    if (dict_name == NULL &&
        (dict_name = PyUnicode_InternFromString("__dict__")) == NULL) {
        return NULL;
    }
    /* a threading.local answers "__dict__" with this thread's own dict */
    PyObject *d = PyObject_GetAttr(local, dict_name);
    if (d == NULL) {
        return NULL;
    }
    if (!PyDict_Check(d)) {
        Py_DECREF(d);
        PyErr_SetString(PyExc_TypeError,
                        "thread_local_get: the object's __dict__ is not a dict");
        return NULL;
    }
    PyObject *value = PyDict_GetItemWithError(d, name); /* borrowed */
    value = value != NULL ? Py_NewRef(value)
                          : PyErr_Occurred() ? NULL : Py_NewRef(dflt);
    Py_DECREF(d);
    return value;
}

/* Where torch.fx keeps its "symbolic tracing runs" flag (set by
 * torch_compat through _C._set_fx_tracing_flag): a module's dict and the
 * global's name (torch 2.13), or a threading.local and its attribute (2.14+;
 * unset in a thread that never traced: False). Strong references. */
static PyObject *fx_flag_holder = NULL;
static PyObject *fx_flag_name = NULL;
static int fx_flag_is_local = 0;

/* The flag's value, as torch_compat.is_fx_tracing() returns it; NULL
 * without an error when nothing was registered (or the global is gone). */
static PyObject *
load_fx_tracing(void)
{
    if (fx_flag_holder == NULL) {
        return NULL;
    }
    if (fx_flag_is_local) {
        return dl_thread_local_get(fx_flag_holder, fx_flag_name, Py_False);
    }
    PyObject *value = PyDict_GetItemWithError(fx_flag_holder, fx_flag_name);
    return Py_XNewRef(value); /* borrowed -> new */
}

/* LOAD_TORCH_STATE n: torch's state n (DL_STATE_*) as its Python function
 * returns it: a bool (grad mode, any autocast, TF32, the fx flag as torch
 * keeps it), an int (the lengths of the mode stacks), or for the other
 * tracers None when none runs and True when one does (program.py only
 * compares those with None). NULL without an error when it cannot be read
 * (no C++ reader registered, no fx flag). */
static PyObject *
load_torch_state(Py_ssize_t which)
{
    int64_t value;
    if (which == DL_STATE_FX_TRACING) {
        return load_fx_tracing();
    }
    if (tensor_api == NULL || tensor_api->state((int)which, &value) != 1) {
        return NULL;
    }
    switch (which) {
    case DL_STATE_TF_STACK:
    case DL_STATE_DISPATCH_STACK:
        return PyLong_FromLongLong(value);
    case DL_STATE_JIT_TRACING:
    case DL_STATE_FUNCTORCH:
        return Py_NewRef(value ? Py_True : Py_None);
    default:
        return Py_NewRef(value ? Py_True : Py_False);
    }
}

/* One run; see guards.h for the result codes. */
static int
program_run(GuardProgram *p, PyObject *const *args, Py_ssize_t nargs)
{
    if (p->notice != NULL && p->notice->dead) {
        return 0; /* an object it compares by identity is gone */
    }
    if (nargs != p->nargs) {
        PyErr_Format(PyExc_TypeError,
                     "GuardProgram expects %zd arguments, got %zd",
                     p->nargs, nargs);
        goto error_no_regs;
    }
    PyObject *small[DL_SMALL_REGS];
    PyObject **regs = small;
    Py_ssize_t nregs = p->nregs;
    if (nregs > DL_SMALL_REGS) {
        regs = PyMem_Malloc((size_t)nregs * sizeof(PyObject *));
        if (regs == NULL) {
            PyErr_NoMemory();
            goto error_no_regs;
        }
    }
    memcpy(regs, args, (size_t)nargs * sizeof(PyObject *));
    memset(regs + nargs, 0, (size_t)(nregs - nargs) * sizeof(PyObject *));

    int result = 1;
    GuardOp *op = p->ops;
    GuardOp *end = op + p->nops;
    for (; op < end; op++) {
        PyObject *v;
        int ok;
        switch (op->op) {
        case OP_LOAD_CONST:
            if (op->watch != NULL && p->notice->dead) {
                /* held weakly and gone (a collection inside this run may
                 * free it): the borrowed pointer must not be used */
                result = 0;
                goto done;
            }
            Py_INCREF(op->obj);
            regs[op->a] = op->obj;
            continue;
        case OP_LOAD_ATTR:
            v = load_attr(op, regs[op->b]);
            goto loaded;
        case OP_LOAD_ITEM:
            v = load_item(op, regs[op->b]);
            goto loaded;
        case OP_LOAD_CELL:
            v = load_closure(regs[op->b], op->n);
            goto loaded;
        case OP_LOAD_TYPE:
            v = (PyObject *)Py_TYPE(regs[op->b]);
            Py_INCREF(v);
            goto loaded;
        case OP_LOAD_CALL0:
            v = PyObject_CallNoArgs(regs[op->b]);
            goto loaded;
        case OP_LOAD_SIZE:
            v = load_dim(regs[op->b], op->n, 0, op->obj);
            goto loaded;
        case OP_LOAD_STRIDE:
            v = load_dim(regs[op->b], op->n, 1, op->obj);
            goto loaded;
        case OP_LOAD_TORCH_STATE:
            v = load_torch_state(op->n);
            if (v == NULL && !PyErr_Occurred()) {
                result = 0; /* no C++ reader (unregistered since): recompile */
                goto done;
            }
            goto loaded;
        case OP_CHECK_TYPE:
            ok = (PyObject *)Py_TYPE(regs[op->a]) == op->obj;
            break;
        case OP_CHECK_ID:
            ok = regs[op->a] == op->obj;
            break;
        case OP_CHECK_NOT_ID:
            ok = regs[op->a] != op->obj;
            break;
        case OP_CHECK_SAME:
            ok = regs[op->a] == regs[op->b];
            break;
        case OP_CHECK_EQ:
            ok = compare_true(regs[op->a], op->obj, Py_EQ);
            break;
        case OP_CHECK_NE:
            ok = compare_true(regs[op->a], op->obj, Py_NE);
            break;
        case OP_CHECK_LEN: {
            Py_ssize_t len = PyObject_Length(regs[op->a]);
            ok = len < 0 ? -1 : len == op->n;
            break;
        }
        case OP_CHECK_KEYS:
            ok = check_keys(regs[op->a], op->obj);
            break;
        case OP_CHECK_IN:
            ok = PySequence_Contains(regs[op->a], op->obj);
            break;
        case OP_CHECK_NOT_IN:
            ok = PySequence_Contains(regs[op->a], op->obj);
            ok = ok < 0 ? -1 : !ok;
            break;
        case OP_CHECK_TRUTHY:
            ok = PyObject_IsTrue(regs[op->a]);
            break;
        case OP_CHECK_FALSY:
            ok = PyObject_Not(regs[op->a]);
            break;
        case OP_CHECK_TENSOR:
            ok = tensor_check(regs[op->a], op->obj, op->spec);
            break;
        case OP_CHECK_INT_RANGE:
            ok = check_int_range(regs[op->a], (int64_t)op->n, op->hi);
            break;
        case OP_CHECK_INT_EQ: {
            int64_t x, y;
            ok = int_value(regs[op->a], &x) && int_value(regs[op->b], &y) && x == y;
            break;
        }
        case OP_CHECK_INT_EXPR:
            ok = check_int_expr(op, regs);
            break;
        case OP_CHECK_CLASS_LACKS:
            ok = class_lacks(Py_TYPE(regs[op->a]), op->obj);
            break;
        case OP_CHECK_NOT_HASATTR:
            ok = check_not_hasattr(regs[op->a], op->obj);
            break;
        case OP_CHECK_DISTINCT:
            ok = check_distinct(op, regs);
            break;
        default:
            PyErr_SetString(PyExc_SystemError, "bad guard op");
            ok = -1;
        }
        if (ok == 1) {
            continue;
        }
        if (ok == 0) {
            result = 0;
            goto done;
        }
        goto error;
    loaded:
        if (v == NULL) {
            goto error;
        }
        regs[op->a] = v;
    }
    if (p->residual != NULL) {
        PyObject *res = PyObject_Vectorcall(p->residual, args, nargs, NULL);
        if (res == NULL) {
            goto error;
        }
        result = res == Py_True;
        Py_DECREF(res);
    }
    goto done;

error:
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        result = 0;
    }
    else {
        result = -1;
    }
done:
    for (Py_ssize_t i = nargs; i < nregs; i++) {
        Py_XDECREF(regs[i]);
    }
    if (regs != small) {
        PyMem_Free(regs);
    }
    return result;

error_no_regs:
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

int
dl_guard_program_check(PyObject *program, PyObject *const *args,
                       Py_ssize_t nargs)
{
    return program_run((GuardProgram *)program, args, nargs);
}

int
dl_guard_program_dead(PyObject *program)
{
    DeathNotice *notice = ((GuardProgram *)program)->notice;
    return notice != NULL && notice->dead;
}

static PyObject *
program_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                   PyObject *kwnames)
{
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "GuardProgram takes no keyword arguments");
        return NULL;
    }
    int r = program_run((GuardProgram *)self, args,
                        PyVectorcall_NARGS(nargsf));
    if (r < 0) {
        return NULL;
    }
    return PyBool_FromLong(r);
}

/* ------------------------------------------------------------------------ */
/* Construction                                                             */
/* ------------------------------------------------------------------------ */

static int
op_from_name(PyObject *name)
{
    const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (text != NULL) {
        for (int i = 0; i < OP_COUNT; i++) {
            if (strcmp(text, op_names[i]) == 0) {
                return i;
            }
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown guard op %R", name);
    return -1;
}

static void
program_free_ops(GuardProgram *p)
{
    GuardOp *ops = p->ops;
    Py_ssize_t n = p->nops;
    p->ops = NULL;
    p->nops = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (ops[i].watch != NULL) {
            Py_DECREF(ops[i].watch); /* obj was borrowed */
        }
        else {
            Py_XDECREF(ops[i].obj);
        }
        Py_XDECREF(ops[i].cache_type);
        Py_XDECREF(ops[i].cache_descr);
        Py_XDECREF(ops[i].slot_key);
        tensor_spec_free(ops[i].spec);
        PyMem_Free(ops[i].expr);
    }
    PyMem_Free(ops);
}

/* An op given weakref.ref `ref` (n = 1): hold its referent weakly. */
static int
watch_object(GuardProgram *p, GuardOp *out, PyObject *ref)
{
    PyObject *target = PyWeakref_Check(ref) ? dl_weakref_target(ref) : NULL;
    if (target == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%s with n=1: obj must be a weakref.ref to a live object",
                     op_names[out->op]);
        return -1;
    }
    if (p->notice == NULL) {
        p->notice = PyObject_New(DeathNotice, &DeathNoticeType);
        if (p->notice == NULL) {
            Py_DECREF(target);
            return -1;
        }
        p->notice->dead = 0;
    }
    out->watch = PyWeakref_NewRef(target, (PyObject *)p->notice);
    /* borrowed: alive until the notice is set */
    out->obj = out->watch != NULL ? target : NULL;
    Py_DECREF(target);
    return out->watch == NULL ? -1 : 0;
}

/* Parse one op tuple into *out; `defined` marks loaded registers. */
static int
parse_op(GuardProgram *p, PyObject *item, GuardOp *out, char *defined)
{
    PyObject *name, *obj;
    int a, b;
    Py_ssize_t n;
    if (!PyTuple_Check(item) ||
        !PyArg_ParseTuple(item, "OiinO;guard op (name, a, b, n, obj)", &name,
                          &a, &b, &n, &obj)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError,
                            "guard op must be a (name, a, b, n, obj) tuple");
        }
        return -1;
    }
    int op = op_from_name(name);
    if (op < 0) {
        return -1;
    }
    out->op = op;
    out->a = a;
    out->b = b;
    out->n = n;
    Py_ssize_t nregs = p->nregs;
#define BAD_REG(r) ((r) < 0 || (r) >= nregs)
    if (op < OP_FIRST_CHECK) {
        if (BAD_REG(a) || a < p->nargs || defined[a]) {
            PyErr_Format(PyExc_ValueError,
                         "%s: bad destination register %d", op_names[op], a);
            return -1;
        }
        if (op != OP_LOAD_CONST && op != OP_LOAD_TORCH_STATE &&
            (BAD_REG(b) || !defined[b])) {
            PyErr_Format(PyExc_ValueError,
                         "%s: register %d read before it is loaded",
                         op_names[op], b);
            return -1;
        }
    }
    else {
        if (BAD_REG(a) || !defined[a] ||
            ((op == OP_CHECK_SAME || op == OP_CHECK_INT_EQ) &&
             (BAD_REG(b) || !defined[b]))) {
            PyErr_Format(PyExc_ValueError,
                         "%s: register read before it is loaded",
                         op_names[op]);
            return -1;
        }
    }
#undef BAD_REG
    if ((op == OP_LOAD_ATTR && !PyUnicode_Check(obj)) ||
        (op == OP_CHECK_NOT_HASATTR && !PyUnicode_Check(obj)) ||
        (op == OP_LOAD_ITEM && n == 1 && !PyUnicode_Check(obj) && !PyLong_CheckExact(obj)) ||
        (op == OP_LOAD_CELL && n < 0) ||
        (op == OP_CHECK_KEYS && !PyList_Check(obj)) ||
        (op == OP_CHECK_CLASS_LACKS && !all_str(obj))) {
        PyErr_Format(PyExc_TypeError, "%s: bad operand %R", op_names[op],
                     obj);
        return -1;
    }
    if (op == OP_LOAD_TORCH_STATE && (n < 0 || n >= DL_STATE_COUNT)) {
        PyErr_Format(PyExc_ValueError, "LOAD_TORCH_STATE: no state %zd", n);
        return -1;
    }
    if ((op == OP_LOAD_SIZE || op == OP_LOAD_STRIDE) && n < 0) {
        PyErr_Format(PyExc_ValueError, "%s: bad dimension", op_names[op]);
        return -1;
    }
    if (op == OP_CHECK_INT_RANGE) {
        int overflow = 0;
        out->hi = PyLong_Check(obj) ? PyLong_AsLongLongAndOverflow(obj, &overflow) : 0;
        if (!PyLong_Check(obj) || overflow || PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "CHECK_INT_RANGE: obj is the upper bound (int64)");
            return -1;
        }
    }
    if (op == OP_CHECK_INT_EXPR &&
        parse_int_expr(out, obj, p->nregs, defined) < 0) {
        return -1;
    }
    if (op == OP_CHECK_DISTINCT && parse_distinct(out, obj, p->nregs, defined) < 0) {
        return -1;
    }
    if (op == OP_CHECK_TENSOR) {
        out->spec = tensor_spec_new(obj);
        if (out->spec == NULL) {
            return -1;
        }
        obj = PyTuple_GET_ITEM(obj, 0); /* the op holds the expected type */
    }
    if ((op == OP_CHECK_ID || op == OP_LOAD_CONST) && n == 1) {
        if (watch_object(p, out, obj) < 0) {
            return -1;
        }
    }
    else if (op == OP_LOAD_ATTR || (op == OP_LOAD_ITEM && PyUnicode_CheckExact(obj))) {
        Py_INCREF(obj);
        PyUnicode_InternInPlace(&obj); /* usually the dict's own key object */
        out->obj = obj;
    }
    else {
        Py_INCREF(obj);
        out->obj = obj;
    }
    if (op < OP_FIRST_CHECK) {
        defined[a] = 1;
    }
    return 0;
}

static PyObject *
program_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nargs", "nregs", "ops", "residual", NULL};
    Py_ssize_t nargs, nregs;
    PyObject *ops_in, *residual = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nnO|O:GuardProgram",
                                     kwlist, &nargs, &nregs, &ops_in,
                                     &residual)) {
        return NULL;
    }
    if (nargs < 2 || nregs < nargs || nregs > (1 << 24)) {
        PyErr_SetString(PyExc_ValueError,
                        "GuardProgram: need 2 <= nargs <= nregs");
        return NULL;
    }
    if (residual != Py_None && !PyCallable_Check(residual)) {
        PyErr_SetString(PyExc_TypeError,
                        "GuardProgram: residual must be callable or None");
        return NULL;
    }
    PyObject *ops = PySequence_Tuple(ops_in);
    if (ops == NULL) {
        return NULL;
    }
    GuardProgram *p = (GuardProgram *)type->tp_alloc(type, 0);
    if (p == NULL) {
        Py_DECREF(ops);
        return NULL;
    }
    p->vectorcall = program_vectorcall;
    p->nargs = nargs;
    p->nregs = nregs;
    p->description = ops; /* owns the reference */
    if (residual != Py_None) {
        Py_INCREF(residual);
        p->residual = residual;
    }
    Py_ssize_t nops = PyTuple_GET_SIZE(ops);
    char *defined = PyMem_Calloc((size_t)nregs, 1);
    p->ops = PyMem_Calloc((size_t)(nops > 0 ? nops : 1), sizeof(GuardOp));
    if (defined == NULL || p->ops == NULL) {
        PyMem_Free(defined);
        Py_DECREF(p);
        return PyErr_NoMemory();
    }
    memset(defined, 1, (size_t)nargs);
    for (Py_ssize_t i = 0; i < nops; i++) {
        if (parse_op(p, PyTuple_GET_ITEM(ops, i), &p->ops[i], defined) < 0) {
            p->nops = i + 1; /* free what was parsed (op i may be partial) */
            PyMem_Free(defined);
            Py_DECREF(p);
            return NULL;
        }
    }
    p->nops = nops;
    PyMem_Free(defined);
    return (PyObject *)p;
}

static int
program_traverse(GuardProgram *p, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < p->nops; i++) {
        if (p->ops[i].watch != NULL) {
            Py_VISIT(p->ops[i].watch);
        }
        else {
            Py_VISIT(p->ops[i].obj);
        }
        Py_VISIT(p->ops[i].cache_type);
        Py_VISIT(p->ops[i].cache_descr);
        if (p->ops[i].spec != NULL) {
            Py_VISIT(p->ops[i].spec->dtype);
            Py_VISIT(p->ops[i].spec->device);
        }
    }
    Py_VISIT(p->residual);
    Py_VISIT(p->description);
    return 0;
}

static int
program_clear(GuardProgram *p)
{
    program_free_ops(p);
    Py_CLEAR(p->residual);
    Py_CLEAR(p->description);
    Py_CLEAR(p->notice);
    /* With no ops and no residual a run would pass: make it fail. */
    p->nargs = -1;
    return 0;
}

static void
program_dealloc(GuardProgram *p)
{
    PyObject_GC_UnTrack(p);
    if (p->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)p);
    }
    program_free_ops(p);
    Py_CLEAR(p->residual);
    Py_CLEAR(p->description);
    Py_CLEAR(p->notice);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyObject *
program_repr(GuardProgram *p)
{
    return PyUnicode_FromFormat("<dynamo_lite._C.GuardProgram: %zd ops%s>",
                                p->nops,
                                p->residual != NULL ? " + residual" : "");
}

static PyObject *
program_get_ops(GuardProgram *p, void *Py_UNUSED(closure))
{
    if (p->description == NULL) {
        return PyTuple_New(0);
    }
    Py_INCREF(p->description);
    return p->description;
}

static PyObject *
program_get_residual(GuardProgram *p, void *Py_UNUSED(closure))
{
    PyObject *r = p->residual != NULL ? p->residual : Py_None;
    Py_INCREF(r);
    return r;
}

static PyObject *
program_get_dead(GuardProgram *p, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(p->notice != NULL && p->notice->dead);
}

static PyGetSetDef program_getset[] = {
    {"dead", (getter)program_get_dead, NULL,
     "True once an object it holds weakly has died (every run fails).",
     NULL},
    {"ops", (getter)program_get_ops, NULL, "The ops, as given.", NULL},
    {"residual", (getter)program_get_residual, NULL,
     "The residual Python check, or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject DLGuardProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dynamo_lite._C.GuardProgram",
    .tp_basicsize = sizeof(GuardProgram),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "GuardProgram(nargs, nregs, ops, residual=None): the compiled "
              "guard of a cache entry; calling it with the frame's argument "
              "slots, globals and function returns True when every check "
              "passes (see csrc/guards.c).",
    .tp_new = program_new,
    .tp_dealloc = (destructor)program_dealloc,
    .tp_traverse = (traverseproc)program_traverse,
    .tp_clear = (inquiry)program_clear,
    .tp_vectorcall_offset = offsetof(GuardProgram, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)program_repr,
    .tp_getset = program_getset,
    .tp_weaklistoffset = offsetof(GuardProgram, weakreflist),
};

/* ------------------------------------------------------------------------ */
/* Module functions                                                         */
/* ------------------------------------------------------------------------ */

static PyObject *
set_tensor_api(PyObject *module, PyObject *capsule)
{
    if (capsule == Py_None) {
        tensor_api = NULL;
        Py_CLEAR(tensor_api_capsule);
        Py_RETURN_NONE;
    }
    const DLTensorAPI *api = PyCapsule_GetPointer(capsule, DL_TENSOR_API_NAME);
    if (api == NULL) {
        return NULL;
    }
    if (api->version != DL_TENSOR_API_VERSION) {
        PyErr_Format(PyExc_ValueError,
                     "tensor API version %d, expected %d", api->version,
                     DL_TENSOR_API_VERSION);
        return NULL;
    }
    Py_INCREF(capsule);
    Py_XSETREF(tensor_api_capsule, capsule);
    tensor_api = api;
    Py_RETURN_NONE;
}

static PyObject *
set_fx_tracing_flag(PyObject *module, PyObject *const *argv, Py_ssize_t argc)
{
    if (argc != 3 || !PyUnicode_Check(argv[1]) || !PyBool_Check(argv[2]) ||
        (argv[2] == Py_False && !PyDict_Check(argv[0]))) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_fx_tracing_flag(holder, name, is_local): a dict "
                        "(or a threading.local when is_local), a str, a bool");
        return NULL;
    }
    Py_XSETREF(fx_flag_holder, Py_NewRef(argv[0]));
    Py_XSETREF(fx_flag_name, Py_NewRef(argv[1]));
    fx_flag_is_local = argv[2] == Py_True;
    Py_RETURN_NONE;
}

/* _torch_state(which): what LOAD_TORCH_STATE loads (None: not readable). */
static PyObject *
torch_state_py(PyObject *module, PyObject *arg)
{
    Py_ssize_t which = PyLong_AsSsize_t(arg);
    if (which == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (which < 0 || which >= DL_STATE_COUNT) {
        PyErr_Format(PyExc_ValueError, "no torch state %zd", which);
        return NULL;
    }
    PyObject *v = load_torch_state(which);
    if (v == NULL && !PyErr_Occurred()) {
        Py_RETURN_NONE;
    }
    return v;
}

static PyObject *
has_tensor_api(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(tensor_api != NULL);
}

static PyMethodDef guard_methods[] = {
    {"_set_tensor_api", set_tensor_api, METH_O,
     "_set_tensor_api(capsule or None)\n\nUse the C++ tensor reader of "
     "dynamo_lite._tensor_meta for CHECK_TENSOR (None: attribute reads)."},
    {"_set_fx_tracing_flag", (PyCFunction)(void (*)(void))set_fx_tracing_flag,
     METH_FASTCALL,
     "_set_fx_tracing_flag(holder, name, is_local)\n\nWhere LOAD_TORCH_STATE "
     "reads torch.fx's tracing flag: holder[name] (a module's dict), or "
     "this thread's `name` in the threading.local holder (False if unset)."},
    {"_torch_state", torch_state_py, METH_O,
     "_torch_state(which) -> what LOAD_TORCH_STATE which loads, or None "
     "when it cannot be read (no reader registered)."},
    {"_has_tensor_api", has_tensor_api, METH_NOARGS,
     "_has_tensor_api() -> True if a C++ tensor reader is registered."},
    {NULL, NULL, 0, NULL},
};

int
dl_guards_init(PyObject *module)
{
#define INTERN(var, text)                                                    \
    if ((var) == NULL && ((var) = PyUnicode_InternFromString(text)) == NULL) \
        return -1;
    INTERN(str_dtype, "dtype");
    INTERN(str_shape, "shape");
    INTERN(str_stride, "stride");
    INTERN(str_requires_grad, "requires_grad");
    INTERN(str_device, "device");
    INTERN(str_keys, "keys");
    INTERN(str_getattribute, "__getattribute__");
#undef INTERN
    if (object_getattribute == NULL) {
        /* borrowed; object's own attribute lives as long as the process
         * (through _PyType_Lookup: from 3.12 a static type's tp_dict is
         * NULL, its dict is per interpreter) */
        object_getattribute =
            _PyType_Lookup(&PyBaseObject_Type, str_getattribute);
        if (object_getattribute == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError,
                                "object.__getattribute__ not found");
            }
            return -1;
        }
    }
    if (function_code_descr == NULL) {
        PyObject *name = PyUnicode_InternFromString("__code__");
        if (name == NULL) {
            return -1;
        }
        PyObject *descr = _PyType_Lookup(&PyFunction_Type, name); /* borrowed */
        Py_DECREF(name);
        if (descr == NULL || !Py_IS_TYPE(descr, &PyGetSetDescr_Type)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError,
                                "function.__code__ is not a getset descriptor");
            }
            return -1;
        }
        Py_INCREF(descr);
        function_code_descr = descr;
    }
    if (PyType_Ready(&DeathNoticeType) < 0 ||
        PyType_Ready(&DLGuardProgramType) < 0) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "GuardProgram",
                              (PyObject *)&DLGuardProgramType) < 0) {
        return -1;
    }
    if (PyModule_AddFunctions(module, guard_methods) < 0) {
        return -1;
    }
    PyObject *names = PyTuple_New(OP_COUNT);
    if (names == NULL) {
        return -1;
    }
    for (int i = 0; i < OP_COUNT; i++) {
        PyObject *s = PyUnicode_FromString(op_names[i]);
        if (s == NULL) {
            Py_DECREF(names);
            return -1;
        }
        PyTuple_SET_ITEM(names, i, s);
    }
    if (PyModule_AddObject(module, "GUARD_OPS", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    return 0;
}
