/*
 * tensor_meta.cpp -- dynamo_lite._tensor_meta: read a tensor's metadata
 * straight from its c10::TensorImpl, for the guard evaluator (guards.c).
 *
 * Why C++: through Python attributes, checking one nn.Parameter's dtype,
 * device, sizes, strides and requires_grad costs about a microsecond (every
 * getter of a Tensor subclass first looks up __torch_function__); reading
 * the TensorImpl costs a few nanoseconds. Models guard every parameter on
 * every call, so this is most of the cache-hit cost of a large module.
 *
 * It also reads the pieces of torch's state every guard program checks (grad
 * mode, autocast, mode stacks, other tracers, cuBLAS TF32: state()), which
 * through torch's Python functions cost about a quarter microsecond per call.
 *
 * Only light c10 headers and two ATen headers are included (the file builds
 * in seconds), and nothing assumes torch's Python object layout at build time:
 * a tensor object holds its TensorImpl pointer at a fixed offset, which
 * guards/tensor_api.py finds at run time by comparing the words of probe
 * tensors with `tensor._cdata` (the TensorImpl address torch reports), then
 * passes to configure(). It then checks, on probe tensors of several kinds,
 * that read() agrees with the Python attributes; if anything disagrees the
 * API is not registered and guards read attributes instead.
 *
 * The answer matches what Python attribute reads return for plain tensors,
 * nn.Parameter and nn.Buffer-like subclasses without their own
 * __torch_function__/__torch_dispatch__ (the only types guards/ sends here).
 * Tested by tests/unit/test_guards.py.
 */
#include <Python.h>

#include <ATen/Context.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/GradMode.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include <memory>
#include <vector>

extern "C" {
#include "tensor_meta.h"
}

/* Two accessors of libtorch_cpu whose headers would pull in much of ATen:
 * declared here as torch declares them (the return type is not part of the
 * symbol; only emptiness is read). A torch without them fails to load this
 * module, and guards read everything through Python (tensor_api.py). */
namespace torch::jit::tracer {
struct TracingState;
TORCH_API const std::shared_ptr<TracingState> &getTracingState();
} // namespace torch::jit::tracer
namespace at::functorch {
struct DynamicLayer;
TORCH_API const std::vector<DynamicLayer> &getDynamicLayerStack();
} // namespace at::functorch

namespace {

/* Byte offset of the c10::TensorImpl* inside a tensor object; 0 = not
 * configured (check() answers -1, read() raises). */
Py_ssize_t impl_offset = 0;

inline c10::TensorImpl *impl_of(PyObject *obj) {
    return *reinterpret_cast<c10::TensorImpl **>(
        reinterpret_cast<char *>(obj) + impl_offset);
}

int check(PyObject *obj, const DLTensorExpect *e) {
    if (impl_offset == 0) {
        return -1;
    }
    try {
        c10::TensorImpl *impl = impl_of(obj);
        if (impl == nullptr) {
            return -1;
        }
        if (static_cast<int>(impl->dtype().toScalarType()) != e->scalar_type) {
            return 0;
        }
        c10::IntArrayRef sizes = impl->sizes();
        if (static_cast<int64_t>(sizes.size()) != e->ndim) {
            return 0;
        }
        const int64_t *s = sizes.data();
        for (int i = 0; i < e->ndim; i++) {
            if (e->sizes[i] != -1 && s[i] != e->sizes[i]) {
                return 0;
            }
        }
        c10::IntArrayRef strides = impl->strides();
        const int64_t *st = strides.data();
        for (int i = 0; i < e->ndim; i++) {
            if (e->strides[i] != -1 && st[i] != e->strides[i]) {
                return 0;
            }
        }
        if (static_cast<int>(impl->requires_grad()) != e->requires_grad) {
            return 0;
        }
        c10::Device device = impl->device();
        if (static_cast<int>(device.type()) != e->device_type ||
            static_cast<int>(device.index()) != e->device_index) {
            return 0;
        }
        return 1;
    } catch (...) {
        return -1;
    }
}

int dim(PyObject *obj, int d, int stride, int64_t *out) {
    if (impl_offset == 0) {
        return -1;
    }
    try {
        c10::TensorImpl *impl = impl_of(obj);
        if (impl == nullptr || impl->has_symbolic_sizes_strides()) {
            return -1;
        }
        c10::IntArrayRef values = stride ? impl->strides() : impl->sizes();
        if (d < 0 || d >= static_cast<int>(values.size())) {
            return -1;
        }
        *out = values[d];
        return 1;
    } catch (...) {
        return -1;
    }
}

/* torch's per-thread state (tensor_meta.h DL_STATE_*), as its Python
 * functions report it: autocast is on for a device while its Autocast key is
 * not excluded on the thread (at::autocast::is_autocast_enabled). */
int state(int which, int64_t *out) {
    try {
        switch (which) {
        case DL_STATE_GRAD_ENABLED:
            *out = c10::GradMode::is_enabled();
            return 1;
        case DL_STATE_ANY_AUTOCAST: {
            c10::DispatchKeySet excluded =
                c10::impl::tls_local_dispatch_key_set().excluded_;
            *out = (excluded & c10::autocast_dispatch_keyset) !=
                   c10::autocast_dispatch_keyset;
            return 1;
        }
        case DL_STATE_TF_STACK:
            *out = at::impl::PythonTorchFunctionTLS::stack_len();
            return 1;
        case DL_STATE_DISPATCH_STACK:
            *out = c10::impl::TorchDispatchModeTLS::stack_len();
            return 1;
        case DL_STATE_JIT_TRACING:
            *out = static_cast<bool>(torch::jit::tracer::getTracingState());
            return 1;
        case DL_STATE_FUNCTORCH:
            *out = !at::functorch::getDynamicLayerStack().empty();
            return 1;
        case DL_STATE_CUBLAS_TF32:
            *out = at::globalContext().allowTF32CuBLAS();
            return 1;
        default:
            return -1;
        }
    } catch (...) {
        return -1;
    }
}

DLTensorAPI api = {DL_TENSOR_API_VERSION, check, dim, state};

/* state(which) -> int: what DLTensorAPI.state reads (for the checks of
 * guards/program.py and the tests). */
PyObject *state_py(PyObject *, PyObject *arg) {
    long which = PyLong_AsLong(arg);
    if (which == -1 && PyErr_Occurred()) {
        return nullptr;
    }
    int64_t value;
    if (which < 0 || which >= DL_STATE_COUNT ||
        state(static_cast<int>(which), &value) != 1) {
        PyErr_Format(PyExc_ValueError, "no torch state %ld", which);
        return nullptr;
    }
    return PyLong_FromLongLong(value);
}

/* read(t) -> (scalar_type, device_type, device_index, requires_grad,
 *             sizes, strides): the codes a DLTensorExpect holds. */
PyObject *read(PyObject *, PyObject *obj) {
    if (impl_offset == 0) {
        PyErr_SetString(PyExc_RuntimeError, "configure() was not called");
        return nullptr;
    }
    if (Py_TYPE(obj)->tp_basicsize < impl_offset + (Py_ssize_t)sizeof(void *)) {
        PyErr_SetString(PyExc_TypeError, "read() expects a torch.Tensor");
        return nullptr;
    }
    try {
        c10::TensorImpl *impl = impl_of(obj);
        c10::IntArrayRef sizes = impl->sizes();
        c10::IntArrayRef strides = impl->strides();
        PyObject *sz = PyTuple_New(static_cast<Py_ssize_t>(sizes.size()));
        PyObject *st = PyTuple_New(static_cast<Py_ssize_t>(strides.size()));
        if (sz == nullptr || st == nullptr) {
            Py_XDECREF(sz);
            Py_XDECREF(st);
            return nullptr;
        }
        for (size_t i = 0; i < sizes.size(); i++) {
            PyTuple_SET_ITEM(sz, i, PyLong_FromLongLong(sizes[i]));
            PyTuple_SET_ITEM(st, i, PyLong_FromLongLong(strides[i]));
        }
        c10::Device device = impl->device();
        return Py_BuildValue("iiiiNN",
                             static_cast<int>(impl->dtype().toScalarType()),
                             static_cast<int>(device.type()),
                             static_cast<int>(device.index()),
                             static_cast<int>(impl->requires_grad()), sz, st);
    } catch (const std::exception &exc) {
        PyErr_SetString(PyExc_RuntimeError, exc.what());
        return nullptr;
    }
}

/* configure(offset): where the TensorImpl pointer is in a tensor object. */
PyObject *configure(PyObject *, PyObject *arg) {
    Py_ssize_t offset = PyLong_AsSsize_t(arg);
    if (offset == -1 && PyErr_Occurred()) {
        return nullptr;
    }
    if (offset < (Py_ssize_t)sizeof(PyObject) ||
        offset % (Py_ssize_t)sizeof(void *) != 0) {
        PyErr_SetString(PyExc_ValueError, "bad TensorImpl offset");
        return nullptr;
    }
    impl_offset = offset;
    Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"configure", configure, METH_O,
     "configure(offset)\n\nByte offset of the c10::TensorImpl pointer in a "
     "tensor object (found by guards/tensor_api.py)."},
    {"state", state_py, METH_O,
     "state(which) -> int: torch's thread-local state `which` (DL_STATE_* "
     "in csrc/tensor_meta.h), read in C++."},
    {"read", read, METH_O,
     "read(t) -> (scalar_type, device_type, device_index, requires_grad, "
     "sizes, strides) as the C++ library sees the tensor."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "dynamo_lite._tensor_meta",
    "Tensor metadata read from c10::TensorImpl (see csrc/tensor_meta.cpp).",
    -1,
    methods,
};

} // namespace

PyMODINIT_FUNC PyInit__tensor_meta(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (m == nullptr) {
        return nullptr;
    }
    PyObject *capsule = PyCapsule_New(&api, DL_TENSOR_API_NAME, nullptr);
    if (capsule == nullptr || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
