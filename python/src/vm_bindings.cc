// Devices, the virtual machine and its tensors (DLPack in and out).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/numpy.h>
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
  out["svm"] = d.svm_coarse_grain;  // the opencl-gpu target's tensor offsets need it
  out["image_pitch_alignment"] = d.image_pitch_alignment;  // 0: no images over buffers
  out["read_write_image_args"] = d.read_write_image_args;  // 0: no read_write image parameters
  out["capabilities"] = d.capabilities();
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
    case Value::Kind::kTuple: {
      py::tuple out(v.fields.size());
      for (size_t i = 0; i < v.fields.size(); ++i) out[i] = python_value(function, v.fields[i]);
      return out;
    }
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
    d["device_count"] = i.device_count;
    d["device_us"] = i.device_us;
    py::list nodes;  // (op type, node name) of the model nodes it computes
    for (const NodeOrigin& n : i.nodes) nodes.append(py::make_tuple(n.op, n.node));
    d["nodes"] = nodes;
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
  out["svm_allocations"] = p.svm_allocations;
  out["kernel_launches"] = p.kernel_launches;
  out["programs_built"] = p.programs_built;
  out["programs_loaded"] = p.programs_loaded;
  out["host_to_device"] = p.host_to_device;
  out["host_to_device_bytes"] = p.host_to_device_bytes;
  out["device_to_host"] = p.device_to_host;
  out["device_to_host_bytes"] = p.device_to_host_bytes;
  out["constant_bytes"] = p.constant_bytes;
  out["scopes"] = scopes;
  out["device_busy_us"] = p.device_busy_us;
  out["device_span_us"] = p.device_span_us;
  return out;
}

// numpy's name for a dtype (the same words Stowage uses).
py::dtype numpy_dtype(DType dtype) { return py::dtype(std::string(dtype_name(dtype))); }

// A new numpy array holding a host copy of `t`, read with the GIL released.
py::array host_array(const Tensor& t) {
  py::array out(numpy_dtype(t.dtype()), t.shape());
  auto* data = static_cast<std::byte*>(out.mutable_data());
  {
    py::gil_scoped_release release;
    t.copy_to_host(std::span(data, t.nbytes()));
  }
  return out;
}

bool is_device(py::handle device, int type, int id) {
  return !device.is_none() && device.equal(py::make_tuple(type, id));
}

// __dlpack__ of the DLPack 1.0 protocol, answered with a (legacy) "dltensor"
// capsule: a device tensor exports itself (kDLOpenCL) unless `dl_device` asks for
// the host, which gets a copy; `copy` is honoured both ways.
py::capsule export_dlpack(const Tensor& t, py::object dl_device, py::object copy) {
  const bool copy_required = !copy.is_none() && copy.cast<bool>();
  const bool copy_refused = !copy.is_none() && !copy.cast<bool>();
  if (t.on_host()) {
    if (!dl_device.is_none() && !is_device(dl_device, kDLCPU, 0)) {
      throw py::buffer_error("a host stowage.Tensor exports to the host (kDLCPU, 0) only");
    }
    if (copy_refused) throw py::buffer_error("a host stowage.Tensor exports a copy; copy=False cannot be honoured");
    return make_dltensor_capsule(t.to_dlpack());
  }
  if (is_device(dl_device, kDLCPU, 0)) {
    if (copy_refused) {
      throw py::buffer_error("a device stowage.Tensor reaches the host only as a copy; copy=False cannot be honoured");
    }
    DLManagedTensor* host = nullptr;
    {
      py::gil_scoped_release release;
      host = t.to_dlpack();
    }
    return make_dltensor_capsule(host);
  }
  if (!dl_device.is_none() && !is_device(dl_device, kDLOpenCL, t.device_index())) {
    throw py::buffer_error(fmt::format("stowage.Tensor lives on (kDLOpenCL, {}); it exports there or to (kDLCPU, 0)",
                                       t.device_index()));
  }
  DLManagedTensor* device = nullptr;
  {
    py::gil_scoped_release release;
    device = t.to_dlpack_device(copy_required   ? Tensor::DeviceCopy::kAlways
                                : copy_refused ? Tensor::DeviceCopy::kNever
                                               : Tensor::DeviceCopy::kIfNeeded);
  }
  return make_dltensor_capsule(device);
}

void bind_tensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor",
                     "A tensor: on the device (a result of VirtualMachine.invoke or upload) or on the host. "
                     "Reading a device tensor on the host (numpy(), np.asarray, np.from_dlpack(t, device='cpu')) "
                     "copies it, waiting for the device.")
      .def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("scope", &Tensor::scope, "The memory scope holding it; 'host' for host memory.")
      .def_property_readonly("on_device", [](const Tensor& t) { return !t.on_host(); })
      .def(
          "__dlpack__",
          [](const Tensor& t, py::object /*stream*/, py::object /*max_version*/, py::object dl_device,
             py::object copy) { return export_dlpack(t, std::move(dl_device), std::move(copy)); },
          py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__",
           [](const Tensor& t) {
             if (t.on_host()) return py::make_tuple(static_cast<int>(kDLCPU), 0);
             return py::make_tuple(static_cast<int>(kDLOpenCL), t.device_index());
           })
      .def("numpy", &host_array, "A numpy array holding a host copy.")
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype, py::object copy) {
            if (!copy.is_none() && !copy.cast<bool>()) {
              throw py::value_error("stowage.Tensor reads into a new host copy; copy=False cannot be honoured");
            }
            py::object array = host_array(t);
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
      .def(py::init([](const ExecutableHandle& exe, const std::string& device, bool profile, bool kernel_times,
                       bool svm) {
             vm::VmOptions options;
             options.device = device;
             options.profile = profile;
             options.kernel_times = kernel_times;
             options.svm = svm;
             return unwrap(VirtualMachine::create(exe.executable, options));
           }),
           py::arg("executable"), py::arg("device"), py::arg("profile"), py::arg("kernel_times"), py::arg("svm"))
      .def("invoke",
           [](VirtualMachine& machine, const std::string& function, const py::list& items) {
             std::vector<Value> args;
             for (size_t i = 0; i < items.size(); ++i) args.push_back(value_from(function, i, items[i]));
             Value result;
             {
               // Other Python threads run meanwhile. `args` keeps the host arguments
               // alive past the release, so their owners' deleters run with the GIL.
               py::gil_scoped_release release;
               result = machine.invoke(function, args);
             }
             return python_value(function, result);
           })
      .def("upload",
           [](VirtualMachine& machine, const Tensor& tensor) {
             Tensor kept = tensor;
             py::gil_scoped_release release;
             return machine.upload(kept);
           })
      .def_property_readonly("device", [](const VirtualMachine& machine) { return describe_device(machine.device()); })
      // These wait for an invoke running on another thread: without the GIL.
      .def("profile",
           [](const VirtualMachine& machine) {
             vm::Profile profile;
             {
               py::gil_scoped_release release;
               profile = machine.profile();
             }
             return describe_profile(profile);
           })
      .def("reset_profile", &VirtualMachine::reset_profile, py::call_guard<py::gil_scoped_release>())
      .def("set_profiling", &VirtualMachine::set_profiling, py::call_guard<py::gil_scoped_release>())
      .def("synchronize", &VirtualMachine::synchronize, py::call_guard<py::gil_scoped_release>());
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
