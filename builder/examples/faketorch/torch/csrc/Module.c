/* torch._C: plain CPython C API (no pybind11), calling into libtorch_cpu.so
 * through its extern "C" entry points (declared here: this file is C, and
 * faketorch/ops.h is a C++ header). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>

extern double faketorch_add(double a, double b);
extern double faketorch_kernel_checksum(double x);
extern int faketorch_kernel_count(void);
extern const char* faketorch_version(void);
extern int faketorch_cxx11_abi(void);
extern const char* faketorch_describe_add(double a, double b);
extern const char* faketorch_native_functions(void);

static PyObject* py_add(PyObject* self, PyObject* args) {
  double a, b;
  if (!PyArg_ParseTuple(args, "dd", &a, &b)) return NULL;
  return PyFloat_FromDouble(faketorch_add(a, b));
}

static PyObject* py_describe_add(PyObject* self, PyObject* args) {
  double a, b;
  if (!PyArg_ParseTuple(args, "dd", &a, &b)) return NULL;
  const char* text = faketorch_describe_add(a, b);
  PyObject* result = PyUnicode_FromString(text);
  free((void*)text);
  return result;
}

static PyObject* py_kernel_checksum(PyObject* self, PyObject* args) {
  double x;
  if (!PyArg_ParseTuple(args, "d", &x)) return NULL;
  return PyFloat_FromDouble(faketorch_kernel_checksum(x));
}

static PyObject* py_kernel_count(PyObject* self, PyObject* noargs) {
  return PyLong_FromLong(faketorch_kernel_count());
}

static PyObject* py_cxx_version(PyObject* self, PyObject* noargs) {
  return PyUnicode_FromString(faketorch_version());
}

static PyObject* py_native_functions(PyObject* self, PyObject* noargs) {
  return PyUnicode_FromString(faketorch_native_functions());
}

static PyMethodDef methods[] = {
    {"add", py_add, METH_VARARGS, "add(a, b) -> float, computed in libtorch_cpu.so"},
    {"_describe_add", py_describe_add, METH_VARARGS, "'a + b = c', formatted in C++"},
    {"_kernel_checksum", py_kernel_checksum, METH_VARARGS, "sum of all generated kernels at x"},
    {"_kernel_count", py_kernel_count, METH_NOARGS, "number of generated kernels"},
    {"_cxx_version", py_cxx_version, METH_NOARGS, "version string compiled into libtorch_cpu.so"},
    {"_native_functions", py_native_functions, METH_NOARGS, "operators generated from native_functions.yaml"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "torch._C", NULL, -1, methods};

PyMODINIT_FUNC PyInit__C(void) {
  PyObject* m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  /* Upstream exposes this bool; pytorch/xla's setup.py reads it for CXX_ABI. */
  if (PyModule_AddObject(m, "_GLIBCXX_USE_CXX11_ABI", PyBool_FromLong(faketorch_cxx11_abi())) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  /* Built with NumPy support or not (torch/csrc/utils/tensor_numpy.cpp's USE_NUMPY). */
#ifdef USE_NUMPY
  const long has_numpy = 1;
#else
  const long has_numpy = 0;
#endif
  if (PyModule_AddObject(m, "_has_numpy", PyBool_FromLong(has_numpy)) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
