// Devices, the virtual machine and its tensors (DLPack in and out).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "dlpack_capsule.h"
#include "errors.h"
#include "executable_handle.h"
#include "stowage/backend/opencl.h"
#include "stowage/vm/vm.h"

namespace py = pybind11;

namespace stowage::python {
namespace {

using vm::Tensor;
using vm::Value;
using vm::VirtualMachine;

const char* device_type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

py::dict describe_device(const opencl::DeviceInfo& d) {
  py::dict out;
  out["spec"] = d.spec;
  out["name"] = d.name;
  out["vendor"] = d.vendor;
  out["platform"] = d.platform;
  out["version"] = d.version;
  out["driver"] = d.driver;
  out["type"] = device_type_name(d.type);
  out["image_support"] = d.image_support;
  out["global_mem_bytes"] = d.global_mem_bytes;
  out["max_alloc_bytes"] = d.max_alloc_bytes;
  out["fp16"] = d.fp16;
  out["fp64"] = d.fp64;
  return out;
}

py::tuple shape_tuple(const std::vector<int64_t>& shape) { return py::tuple(py::cast(shape)); }

Value value_from(std::string_view function, size_t index, py::handle item) {
  if (py::isinstance<Tensor>(item)) return Value::from(item.cast<const Tensor&>());
  if (py::isinstance<py::bool_>(item) || py::isinstance<py::int_>(item)) {
    try {
      return Value::integer(item.cast<int64_t>());
    } catch (const py::cast_error&) {
      throw StowageError(ErrorKind::kInvalidInput, fmt::format("invoke '{}': argument {}: {} does not fit in int64",
                                                               function, index, py::str(item).cast<std::string>()));
    }
  }
  if (py::isinstance<py::float_>(item)) return Value::real(item.cast<double>());
  throw StowageError(ErrorKind::kInvalidInput,
                     fmt::format("invoke '{}': argument {}: cannot pass a {}", function, index,
                                 py::str(py::type::of(item).attr("__name__")).cast<std::string>()));
}

py::object python_value(std::string_view function, const Value& v) {
  switch (v.kind) {
    case Value::Kind::kTensor:
      return py::cast(v.as_tensor());
    case Value::Kind::kInt:
      return py::int_(v.int_value);
    case Value::Kind::kFloat:
      return py::float_(v.float_value);
    case Value::Kind::kNone:
      return py::none();
    default:
      throw StowageError(ErrorKind::kInvalidInput, fmt::format("invoke '{}': returns a {}, which Python cannot receive",
                                                               function, v.kind_name()));
  }
}

py::dict describe_profile(const vm::Profile& p) {
  py::list instructions;
  for (const vm::InstructionProfile& i : p.instructions) {
    py::dict d;
    d["function"] = i.function;
    d["index"] = i.index;
    d["op"] = std::string(opcode_info(i.op).name);
    d["detail"] = i.detail;
    d["count"] = i.count;
    d["total_us"] = i.total_us;
    instructions.append(d);
  }
  py::dict scopes;
  for (const vm::ScopeUsage& s : p.scopes) {
    py::dict d;
    d["onchip"] = s.onchip;
    d["emulated"] = s.emulated;
    d["capacity"] = s.capacity;
    d["in_use"] = s.in_use;
    d["peak"] = s.peak;
    d["allocations"] = s.allocations;
    scopes[py::str(s.scope)] = d;
  }
  py::dict out;
  out["instructions"] = instructions;
  out["device_allocations"] = p.device_allocations;
  out["device_bytes_allocated"] = p.device_bytes_allocated;
  out["sub_buffers_created"] = p.sub_buffers_created;
  out["kernel_launches"] = p.kernel_launches;
  out["programs_built"] = p.programs_built;
  out["programs_loaded"] = p.programs_loaded;
  out["scopes"] = scopes;
  return out;
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor",
                     "A tensor result of VirtualMachine.invoke. Reading it (numpy(), __dlpack__) copies it "
                     "to the host, waiting for the device.")
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("scope", &Tensor::scope, "The memory scope holding it; 'host' for host memory.")
      .def(
          "__dlpack__",
          [](const Tensor& t, py::object stream, py::object max_version, py::object dl_device, py::object copy) {
            // The export is always a fresh host copy: CPU is the only device it can
            // be on, and a copy cannot be refused.
            if (!dl_device.is_none() && !dl_device.equal(py::make_tuple(static_cast<int>(kDLCPU), 0))) {
              throw py::buffer_error("stowage.Tensor exports to the host (kDLCPU, 0) only");
            }
            if (!copy.is_none() && !copy.cast<bool>()) {
              throw py::buffer_error("stowage.Tensor exports a host copy; copy=False cannot be honoured");
            }
            return make_dltensor_capsule(t.to_dlpack());
          },
          py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); })
      .def(
          "numpy", [](py::object self) { return py::module_::import("numpy").attr("from_dlpack")(self); },
          "A numpy array holding a host copy.")
      .def(
          "__array__",
          [](py::object self, py::object dtype, py::object copy) {
            if (!copy.is_none() && !copy.cast<bool>()) {
              throw py::value_error("stowage.Tensor reads into a new host copy; copy=False cannot be honoured");
            }
            py::object array = self.attr("numpy")();
            if (!dtype.is_none()) array = array.attr("astype")(dtype, py::arg("copy") = false);
            return array;
          },
          py::arg("dtype") = py::none(), py::kw_only(), py::arg("copy") = py::none())
      .def("__repr__", [](const Tensor& t) {
        return fmt::format("stowage.Tensor(shape=({}{}), dtype={}, scope={})", fmt::join(t.shape(), ", "),
                           t.shape().size() == 1 ? "," : "", dtype_name(t.dtype()), t.scope());
      });

  m.def(
      "tensor_from_capsule", [](py::handle capsule) { return unwrap(vm::tensor_from_dlpack(take_dltensor(capsule))); },
      "A host Tensor owning the DLPack capsule's tensor (the capsule is consumed).");
}

void bind_machine(py::module_& m) {
  py::class_<VirtualMachine>(m, "VirtualMachineHandle")
      .def(py::init([](const ExecutableHandle& exe, const std::string& device, bool profile) {
             vm::VmOptions options;
             options.device = device;
             options.profile = profile;
             return unwrap(VirtualMachine::create(exe.executable, options));
           }),
           py::arg("executable"), py::arg("device"), py::arg("profile"))
      .def("invoke",
           [](VirtualMachine& machine, const std::string& function, const py::list& items) {
             std::vector<Value> args;
             for (size_t i = 0; i < items.size(); ++i) args.push_back(value_from(function, i, items[i]));
             return python_value(function, machine.invoke(function, std::move(args)));
           })
      .def_property_readonly("device", [](const VirtualMachine& machine) { return describe_device(machine.device()); })
      .def("profile", [](const VirtualMachine& machine) { return describe_profile(machine.profile()); })
      .def("reset_profile", &VirtualMachine::reset_profile)
      .def("set_profiling", &VirtualMachine::set_profiling)
      .def("synchronize", &VirtualMachine::synchronize);
}

}  // namespace

void bind_vm(py::module_& m) {
  m.def("devices", [] {
    py::list out;
    for (const opencl::DeviceInfo& d : opencl::list_devices()) out.append(describe_device(d));
    return out;
  });
  bind_tensor(m);
  bind_machine(m);
}

}  // namespace stowage::python
