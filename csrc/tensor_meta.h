/*
 * tensor_meta.h -- the C interface between the guard evaluator (guards.c,
 * part of dynamo_lite._C, plain C, no torch dependency) and the optional
 * C++ reader of tensor metadata (tensor_meta.cpp, built as
 * dynamo_lite._tensor_meta against torch's headers).
 *
 * The C++ module exports a PyCapsule named DL_TENSOR_API_NAME holding a
 * DLTensorAPI. guards.c receives it through _C._set_tensor_api(capsule);
 * without it every tensor check reads metadata through Python attributes
 * (slower, same answers for the tensor types the fast path accepts).
 *
 * Tested by tests/unit/test_guards.py.
 */
#ifndef DYNAMO_LITE_TENSOR_META_H
#define DYNAMO_LITE_TENSOR_META_H

#include <stdint.h>

#define DL_TENSOR_API_NAME "dynamo_lite._tensor_meta._C_API"
#define DL_TENSOR_API_VERSION 3

/* Pieces of torch's per-thread state the guards check on every call
 * (DLTensorAPI.state; guards/program.py checks at program build that each
 * answers as torch's Python function does before it uses it):
 *   GRAD_ENABLED    torch.is_grad_enabled()                     0 / 1
 *   ANY_AUTOCAST    torch._C._is_any_autocast_enabled()         0 / 1
 *   TF_STACK        torch._C._len_torch_function_stack()        a length
 *   DISPATCH_STACK  torch._C._len_torch_dispatch_stack()        a length
 *   JIT_TRACING     torch._C._get_tracing_state() is not None   0 / 1
 *   FUNCTORCH       torch._C._functorch.peek_interpreter_stack()
 *                   is not None                                 0 / 1
 *   FX_TRACING      torch.fx's "symbolic tracing runs" flag (a Python
 *                   value, torch_compat.is_fx_tracing): guards.c reads it
 *                   from where _C._set_fx_tracing_flag says; state() -1
 *   CUBLAS_TF32     torch._C._get_cublas_allow_tf32()           0 / 1 */
enum {
    DL_STATE_GRAD_ENABLED = 0,
    DL_STATE_ANY_AUTOCAST,
    DL_STATE_TF_STACK,
    DL_STATE_DISPATCH_STACK,
    DL_STATE_JIT_TRACING,
    DL_STATE_FUNCTORCH,
    DL_STATE_FX_TRACING,
    DL_STATE_CUBLAS_TF32,
    DL_STATE_COUNT
};

/* What a tensor check expects, in the C++ library's own codes
 * (c10::ScalarType, c10::DeviceType, device index -1 = none). */
typedef struct {
    int scalar_type;
    int device_type;
    int device_index;
    int requires_grad;
    int ndim;
    const int64_t *sizes;   /* ndim entries, owned by the guard program;
                             * -1 = any (a symbolic size) */
    const int64_t *strides; /* ndim entries, owned by the guard program;
                             * -1 = any (a symbolic stride) */
} DLTensorExpect;

typedef struct {
    int version; /* DL_TENSOR_API_VERSION */
    /* 1: `t` (a torch.Tensor instance, any subclass) has exactly the
     *    expected dtype, device, sizes, strides and requires_grad;
     * 0: it differs;
     * -1: cannot tell without Python (e.g. symbolic sizes); no Python error
     *    is set and the caller falls back to attribute reads. */
    int (*check)(PyObject *t, const DLTensorExpect *expect);
    /* 1: *out is t.size(dim) (stride 0) or t.stride(dim) (stride 1);
     * -1: cannot tell without Python (dim out of range, symbolic sizes);
     * no Python error is set. */
    int (*dim)(PyObject *t, int dim, int stride, int64_t *out);
    /* 1: *out is the value of state `which` (DL_STATE_*) on this thread;
     * -1: unknown state or the read failed; no Python error is set. Reads
     * torch's thread-local state directly: no Python runs. */
    int (*state)(int which, int64_t *out);
} DLTensorAPI;

#endif /* DYNAMO_LITE_TENSOR_META_H */
