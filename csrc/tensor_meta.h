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
#define DL_TENSOR_API_VERSION 2

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
} DLTensorAPI;

#endif /* DYNAMO_LITE_TENSOR_META_H */
