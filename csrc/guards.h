/*
 * guards.h -- the guard evaluator of dynamo_lite._C (csrc/guards.c), as seen
 * by the hook (csrc/eval_frame.c).
 *
 * A GuardProgram is the compiled check of one cache entry: a straight list
 * of register loads and checks built by dynamo_lite/guards/program.py.
 * The hook calls it directly (no argument tuple, no Python frame).
 * Tested by tests/unit/test_guards.py.
 */
#ifndef DYNAMO_LITE_GUARDS_H
#define DYNAMO_LITE_GUARDS_H

#include <Python.h>

extern PyTypeObject DLGuardProgramType;

/* Run a GuardProgram on args[0..nargs) (the frame's argument slots followed
 * by the frame's globals and function). 1: all checks pass; 0: a check
 * failed (an Exception raised while checking counts as failed and is
 * cleared); -1: a BaseException that is not an Exception (e.g.
 * KeyboardInterrupt) is set. */
int dl_guard_program_check(PyObject *program, PyObject *const *args,
                           Py_ssize_t nargs);

/* 1 if an object the GuardProgram holds weakly has died: it fails every
 * run from then on, and its cache entry can be dropped. */
int dl_guard_program_dead(PyObject *program);

/* getattr(local, name, dflt) for a threading.local `local` (name a str):
 * this thread's value, read from its per-thread dict, with no
 * AttributeError made and dropped when the name is unset. New reference, or
 * NULL with an error set. */
PyObject *dl_thread_local_get(PyObject *local, PyObject *name, PyObject *dflt);

/* Add GuardProgram and _set_tensor_api to the module. 0 on success. */
int dl_guards_init(PyObject *module);

#endif /* DYNAMO_LITE_GUARDS_H */
