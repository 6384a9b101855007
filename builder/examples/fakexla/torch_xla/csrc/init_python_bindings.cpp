// The _XLAC extension module (top-level, as upstream's), plain CPython API.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <faketorch/ops.h>

#include "torch_xla/csrc/version.h"
#include "torch_xla/csrc/xla_ops.h"

namespace {

PyObject* AddViaTorch(PyObject*, PyObject* args) {
  double a, b;
  if (!PyArg_ParseTuple(args, "dd", &a, &b)) return nullptr;
  return PyFloat_FromDouble(torch_xla::add_via_torch(a, b));
}

PyObject* KernelChecksum(PyObject*, PyObject* args) {
  double x;
  if (!PyArg_ParseTuple(args, "d", &x)) return nullptr;
  return PyFloat_FromDouble(torch_xla::kernel_checksum(x));
}

PyObject* TorchCxxVersion(PyObject*, PyObject*) { return PyUnicode_FromString(faketorch::version()); }

PyObject* XlaGitrev(PyObject*, PyObject*) { return PyUnicode_FromString(torch_xla::XLA_GITREV); }

PyMethodDef kMethods[] = {
    {"_add_via_torch", AddViaTorch, METH_VARARGS, "a + b via faketorch::add in libtorch_cpu.so"},
    {"_kernel_checksum", KernelChecksum, METH_VARARGS, "sum of the generated xla kernels at x"},
    {"_torch_cxx_version", TorchCxxVersion, METH_NOARGS, "faketorch::version() as seen from _XLAC"},
    {"_xla_gitrev", XlaGitrev, METH_NOARGS, "git SHA compiled into _XLAC"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_XLAC", nullptr, -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__XLAC() { return PyModule_Create(&kModule); }
