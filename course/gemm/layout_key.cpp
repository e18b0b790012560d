// The layout part of course.gemm.plans.call_key, compiled: what Python reads in ~2.5 us for three
// tensors (seven attribute reads each, a tuple of tuples and its hash), read here from the tensors'
// C++ objects into one bytes object. Built by course/gemm/layout_key.py; a production detail a
// reader may skip (notes/gemm-decisions.md, "Host time").
#include <ATen/core/grad_mode.h>
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>

namespace {

constexpr int kMaxTensors = 8;
constexpr int kMaxDims = 8;

// layout_key(*tensors) -> bytes, or None for an argument that is no strided tensor of at most 8
// dimensions (the caller's checks then say what is wrong with it). Per tensor: one word of flags
// (dimensions, dtype, device type and index, requires_grad, lazy negation, address modulo 32),
// then each dimension's size and stride; None is one word of -1. Grad mode comes first.
PyObject* layout_key(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs > kMaxTensors) {
    Py_RETURN_NONE;
  }
  int64_t words[1 + kMaxTensors * (1 + 2 * kMaxDims)];
  int n = 0;
  try {
    words[n++] = at::GradMode::is_enabled();
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      PyObject* arg = args[i];
      if (arg == Py_None) {
        words[n++] = -1;
        continue;
      }
      if (!THPVariable_Check(arg)) {
        Py_RETURN_NONE;
      }
      const at::Tensor& t = THPVariable_Unpack(arg);
      const int64_t dims = t.dim();
      if (t.layout() != at::kStrided || dims > kMaxDims) {
        Py_RETURN_NONE;
      }
      const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
      words[n++] = dims | (int64_t(t.scalar_type()) << 8) | (int64_t(t.device().type()) << 16) |
                   (int64_t(t.device().index() + 1) << 24) | (int64_t(t.requires_grad()) << 32) |
                   (int64_t(t.is_neg()) << 33) | (int64_t(address & 31) << 40);
      for (int64_t d = 0; d < dims; ++d) {
        words[n++] = t.size(d);
        words[n++] = t.stride(d);
      }
    }
  } catch (const std::exception&) {  // a tensor without storage, symbolic sizes: no key
    Py_RETURN_NONE;
  }
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(words), n * sizeof(int64_t));
}

PyMethodDef methods[] = {
    {"layout_key", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(layout_key)), METH_FASTCALL,
     "layout_key(*tensors) -> bytes | None: the layout of up to 8 tensors (or None) and grad mode"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

#ifndef TORCH_EXTENSION_NAME
#define TORCH_EXTENSION_NAME course_layout_key
#endif
#define COURSE_CONCAT(a, b) a##b
#define COURSE_INIT(name) COURSE_CONCAT(PyInit_, name)

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "course_layout_key", nullptr, -1, methods};

PyMODINIT_FUNC COURSE_INIT(TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&module); }
