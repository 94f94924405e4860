// The extension module gyre_torch._C: makes a gyre backend for torch.distributed.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "gyre_backend.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "gyre as a torch.distributed backend (registered by importing gyre_torch)";
  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout) -> c10::intrusive_ptr<gyre_torch::BackendBase> {
        auto backend = c10::make_intrusive<gyre_torch::GyreBackend>(store, rank, size, timeout);
        gyre_torch::GyreBackend::track(backend);
        return backend;
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>());
  m.attr("torch_api") = TORCH_VERSION_MAJOR >= 2 ? "Backend" : "ProcessGroup";
  // Before the interpreter finalizes (gyre_backend.h: stopAllAtExit).
  py::module_::import("atexit").attr("register")(
      py::cpp_function([] { gyre_torch::GyreBackend::stopAllAtExit(); }));
}
