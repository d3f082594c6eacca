// IR modules, the text form and the op-by-op builder. The Python layer
// (stowage/builder.py) turns Vars into names and checks Python types; every IR
// rule is the C++ builder's, and its messages reach Python unchanged.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "errors.h"
#include "stowage/ir/builder.h"
#include "stowage/ir/names.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"

namespace py = pybind11;

namespace stowage::python {
namespace {

using ir::Arg;
using ir::FunctionBuilder;
using ir::ModuleBuilder;
using ir::Type;

DType dtype_arg(std::string_view op, std::string_view arg, const std::string& name) {
  if (auto dtype = parse_dtype(name)) return *dtype;
  std::string known;
  for (uint8_t code = 0; code < kDTypeCount; ++code) {
    known += fmt::format("{}{}", code ? ", " : "", dtype_name(*dtype_from_code(code)));
  }
  throw StowageError(ErrorKind::kInvalidInput,
                     fmt::format("{}: argument '{}': '{}' is not a dtype (one of {})", op, arg, name, known));
}

// call_kernel / call arguments: names of variables, int and float literals, or None
// (null, for a kernel's buffer parameter the launch leaves unread).
std::vector<Arg> args_from(std::string_view op, const py::list& items) {
  std::vector<Arg> args;
  for (size_t i = 0; i < items.size(); ++i) {
    py::handle item = items[i];
    if (item.is_none()) {
      args.push_back(Arg::null());
    } else if (py::isinstance<py::str>(item)) {
      args.push_back(Arg::variable(item.cast<std::string>()));
    } else if (py::isinstance<py::bool_>(item) || py::isinstance<py::int_>(item)) {
      try {
        args.push_back(Arg::integer(item.cast<int64_t>()));
      } catch (const py::cast_error&) {
        throw StowageError(ErrorKind::kInvalidInput, fmt::format("{}: argument 'args[{}]': {} does not fit in int64",
                                                                 op, i, py::str(item).cast<std::string>()));
      }
    } else if (py::isinstance<py::float_>(item)) {
      args.push_back(Arg::floating(item.cast<double>()));
    } else {
      throw StowageError(ErrorKind::kInvalidInput,
                         fmt::format("{}: argument 'args[{}]': expected a variable, int, float or None, got {}", op, i,
                                     py::str(py::type::of(item).attr("__name__")).cast<std::string>()));
    }
  }
  return args;
}

const char* kind_name(Type::Kind kind) {
  switch (kind) {
    case Type::Kind::kTensor:
      return "Tensor";
    case Type::Kind::kStorage:
      return "Storage";
    case Type::Kind::kShape:
      return "Shape";
    case Type::Kind::kTuple:
      return "Tuple";
    case Type::Kind::kInt:
      return "int";
    case Type::Kind::kFloat:
      return "float";
    case Type::Kind::kBool:
      return "bool";
    case Type::Kind::kObject:
      return "Object";
  }
  return "?";
}

Type scalar_type(const std::string& kind) {
  if (kind == "int") return Type::of(Type::Kind::kInt);
  if (kind == "float") return Type::of(Type::Kind::kFloat);
  if (kind == "bool") return Type::of(Type::Kind::kBool);
  throw StowageError(ErrorKind::kInvalidInput,
                     fmt::format("param: argument 'type': '{}' is not a scalar type (int, float, bool)", kind));
}

// A finished function, waiting to be added to its module.
struct FinishedFunction {
  ir::Function function;
};

std::vector<std::string> function_names(const ir::Module& mod) {
  std::vector<std::string> names;
  for (const auto& f : mod.functions) names.push_back(f.name);
  return names;
}

std::vector<std::string> unit_names(const ir::Module& mod) {
  std::vector<std::string> names;
  for (const auto& u : mod.units) names.push_back(u.name);
  return names;
}

// The bytes of a buffer-protocol object (a compact numpy array, bytes) as shared
// constant data; copied once, without the GIL.
std::shared_ptr<const std::vector<std::byte>> bytes_of(const py::buffer& buffer) {
  py::buffer_info info = buffer.request();
  if (info.ndim > 0) {
    py::ssize_t stride = info.itemsize;
    for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
      if (info.shape[d] != 1 && info.strides[d] != stride) {
        throw StowageError(ErrorKind::kInvalidInput, "constant: the data must be a compact row-major buffer");
      }
      stride *= info.shape[d];
    }
  }
  const auto* begin = static_cast<const std::byte*>(info.ptr);
  const auto size = static_cast<size_t>(info.size * info.itemsize);
  py::gil_scoped_release release;
  return std::make_shared<const std::vector<std::byte>>(begin, begin + size);
}

// A read-only numpy array viewing a constant's bytes, keeping them alive.
py::array constant_array(const ir::ConstantTensor& c) {
  auto keep = new std::shared_ptr<const std::vector<std::byte>>(c.data);
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<const std::vector<std::byte>>*>(p); });
  py::array array(py::dtype(std::string(dtype_name(c.type.dtype))), c.type.shape, c.data->data(), owner);
  py::detail::array_proxy(array.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return array;
}

void bind_module(py::module_& m) {
  py::class_<ir::Module> module(m, "Module", "An IR module: functions and OpenCL C kernel units.");
  module.def("__str__", [](const ir::Module& mod) { return ir::print_module(mod); })
      .def("__repr__",
           [](const ir::Module& mod) {
             return fmt::format("<stowage.Module functions=[{}] kernel_units=[{}]>",
                                fmt::join(function_names(mod), ", "), fmt::join(unit_names(mod), ", "));
           })
      .def("__eq__",
           [](const ir::Module& a, py::object b) -> py::object {
             if (!py::isinstance<ir::Module>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             return py::bool_(a == b.cast<const ir::Module&>());
           })
      .def("__ne__",
           [](const ir::Module& a, py::object b) -> py::object {
             if (!py::isinstance<ir::Module>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             return py::bool_(!(a == b.cast<const ir::Module&>()));
           })
      .def_readwrite("target", &ir::Module::target,
                     "The target the module was made for (\"\" when none); compile() uses it when given none.")
      .def_property_readonly("function_names", &function_names)
      .def_property_readonly("kernel_unit_names", &unit_names)
      .def(
          "text",
          [](const ir::Module& mod, std::optional<uint64_t> external_above) {
            ir::PrintOptions options;
            if (external_above) options.external_above_bytes = *external_above;
            return ir::print_module(mod, options);
          },
          py::arg("external_above") = py::none())
      .def_property_readonly("constants",
                             [](const ir::Module& mod) {
                               // name -> a read-only array of its data, or None for data not given yet
                               py::dict out;
                               for (const auto& c : mod.constants) {
                                 out[py::str(c.name)] = c.data ? py::object(constant_array(c)) : py::none();
                               }
                               return out;
                             })
      .def_property_readonly("constant_scopes",
                             [](const ir::Module& mod) {
                               py::dict out;
                               for (const auto& c : mod.constants) out[py::str(c.name)] = c.scope;
                               return out;
                             })
      .def("with_constant_data", [](const ir::Module& mod, const std::string& name, const py::buffer& data) {
        ir::Module out = mod;
        for (auto& c : out.constants) {
          if (c.name != name) continue;
          auto bytes = bytes_of(data);
          auto nbytes = checked_nbytes(c.type.shape, c.type.dtype);
          if (!nbytes || bytes->size() != *nbytes) {
            throw StowageError(ErrorKind::kInvalidInput,
                               fmt::format("constant '{}': {} bytes given, its type {} needs {}", name, bytes->size(),
                                           ir::print_type(c.type), nbytes ? *nbytes : 0));
          }
          c.data = std::move(bytes);
          return out;
        }
        throw StowageError(ErrorKind::kInvalidInput, fmt::format("the module has no constant '{}'", name));
      });

  m.def(
      "parse",
      [](std::string_view text, std::string_view file_name) { return unwrap(ir::parse_module(text, file_name)); },
      py::arg("text"), py::arg("file_name") = "<input>",
      "Parses the text form; errors read FILE:LINE:COL: error: MESSAGE.");
}

void bind_builders(py::module_& m) {
  m.def("is_reserved_word", [](std::string_view name) { return ir::is_reserved_word(name); }, py::arg("name"),
        "Whether the text form gives `name` a meaning of its own (include/stowage/ir/names.h), so that it cannot "
        "name a variable.");
  m.def(
      "op_table",
      [] {
        py::list ops;
        for (size_t i = 0; i < ir::kOpCount; ++i) {
          const ir::OpInfo& info = ir::op_info(static_cast<ir::Op>(i));
          py::list operands;
          for (ir::Operand operand : info.operand_list()) operands.append(ir::operand_kind_name(operand));
          ops.append(py::make_tuple(info.name, ir::op_result_name(info.result), py::tuple(operands)));
        }
        return ops;
      },
      "The IR's ops (include/stowage/ir/op_table.h) as (name, result, operand kinds), in table order.");

  py::class_<FinishedFunction>(m, "FinishedFunction", "A function finished by ret.")
      .def_property_readonly("name", [](const FinishedFunction& f) { return f.function.name; });

  py::class_<FunctionBuilder>(m, "FunctionBuilder")
      .def_property_readonly("name", &FunctionBuilder::name)
      .def("set_origins",
           [](FunctionBuilder& fb, const std::vector<std::pair<std::string, std::string>>& nodes) {
             std::vector<NodeOrigin> origins;
             for (const auto& [op, node] : nodes) origins.push_back(NodeOrigin{op, node});
             fb.set_origins(std::move(origins));
           })
      .def("param_tensor",
           [](FunctionBuilder& fb, std::string name, std::vector<int64_t> shape, const std::string& dtype) {
             return fb.param(std::move(name), Type::tensor(std::move(shape), dtype_arg("param", "dtype", dtype)));
           })
      .def("param_scalar", [](FunctionBuilder& fb, std::string name,
                              const std::string& kind) { return fb.param(std::move(name), scalar_type(kind)); })
      .def("alloc_storage",
           [](FunctionBuilder& fb, std::vector<int64_t> size, int64_t device, const std::string& dtype,
              std::string scope, std::string name) {
             return fb.alloc_storage(std::move(size), device, dtype_arg("alloc_storage", "dtype", dtype),
                                     std::move(scope), std::move(name));
           })
      .def("alloc_tensor",
           [](FunctionBuilder& fb, const std::string& storage, int64_t offset, std::vector<int64_t> shape,
              const std::string& dtype, std::string name) {
             return fb.alloc_tensor(storage, offset, std::move(shape), dtype_arg("alloc_tensor", "dtype", dtype),
                                    std::move(name));
           })
      // In an image storage: the offset [y, x] (row, column), each >= 0 (checked in Python).
      .def("alloc_tensor",
           [](FunctionBuilder& fb, const std::string& storage, std::array<uint64_t, 2> offset,
              std::vector<int64_t> shape, const std::string& dtype, std::string name) {
             return fb.alloc_tensor(storage, ImageOffset{offset[1], offset[0]}, std::move(shape),
                                    dtype_arg("alloc_tensor", "dtype", dtype), std::move(name));
           })
      .def("alloc_discontiguous_tensor",
           [](FunctionBuilder& fb, const std::string& table_storage, std::vector<int64_t> table_offsets,
              const std::string& data_storage, std::vector<int64_t> data_offsets, std::vector<int64_t> shape,
              const std::string& dtype, std::string name) {
             return fb.alloc_discontiguous_tensor(table_storage, std::move(table_offsets), data_storage,
                                                  std::move(data_offsets), std::move(shape),
                                                  dtype_arg("alloc_discontiguous_tensor", "dtype", dtype),
                                                  std::move(name));
           })
      .def("empty_discontiguous",
           [](FunctionBuilder& fb, std::vector<int64_t> shape, const std::string& dtype, std::string scope,
              std::string table_scope, std::string name) {
             return fb.empty_discontiguous(std::move(shape), dtype_arg("empty_discontiguous", "dtype", dtype),
                                           std::move(scope), std::move(table_scope), std::move(name));
           })
      .def("view",
           [](FunctionBuilder& fb, const std::string& tensor, int64_t offset, std::vector<int64_t> shape,
              const std::string& dtype, std::string name) {
             return fb.view(tensor, offset, std::move(shape), dtype_arg("view", "dtype", dtype), std::move(name));
           })
      .def("kill_object", &FunctionBuilder::kill_object)
      .def("copy_tensor", &FunctionBuilder::copy_tensor)
      .def("call_kernel",
           [](FunctionBuilder& fb, const std::string& kernel, const py::list& args, std::vector<int64_t> grid,
              std::vector<int64_t> local) {
             fb.call_kernel(kernel, args_from("call_kernel", args), std::move(grid), std::move(local));
           })
      .def("empty",
           [](FunctionBuilder& fb, std::vector<int64_t> shape, const std::string& dtype, std::string scope,
              std::string name) {
             return fb.empty(std::move(shape), dtype_arg("empty", "dtype", dtype), std::move(scope), std::move(name));
           })
      .def("call", [](FunctionBuilder& fb, const std::string& function, const py::list& args,
                      std::string name) { return fb.call(function, args_from("call", args), std::move(name)); })
      .def("ret", [](FunctionBuilder& fb, const std::string& var) { return FinishedFunction{fb.ret(var)}; })
      .def("ret_tuple",
           [](FunctionBuilder& fb, const std::vector<std::string>& vars) { return FinishedFunction{fb.ret(vars)}; })
      .def("type_of", [](const FunctionBuilder& fb, const std::string& var) -> py::tuple {
        // (kind, shape, dtype): shape and dtype are None unless kind is "Tensor".
        const Type& type = fb.type_of(var);
        if (type.kind != Type::Kind::kTensor) return py::make_tuple(kind_name(type.kind), py::none(), py::none());
        return py::make_tuple("Tensor", py::tuple(py::cast(type.shape)), std::string(dtype_name(type.dtype)));
      });

  py::class_<ModuleBuilder>(m, "ModuleBuilder")
      .def(py::init<>())
      .def("add_kernels", &ModuleBuilder::add_kernels, py::arg("unit_name"), py::arg("source"))
      .def("function", &ModuleBuilder::function, py::arg("name"))
      .def("add_function", [](ModuleBuilder& mb, const FinishedFunction& f) { mb.add_function(f.function); })
      .def("module", &ModuleBuilder::module)
      .def("add_constant",
           [](ModuleBuilder& mb, std::string name, std::vector<int64_t> shape, const std::string& dtype,
              const py::buffer& data, std::string scope) {
             Type type = Type::tensor(std::move(shape), dtype_arg("constant", "dtype", dtype));
             return mb.add_constant(std::move(name), std::move(type), bytes_of(data), std::move(scope));
           })
      .def("has_kernel",
           [](const ModuleBuilder& mb, std::string_view name) { return mb.module().find_kernel(name) != nullptr; });
}

}  // namespace

void bind_ir(py::module_& m) {
  bind_module(m);
  bind_builders(m);
}

}  // namespace stowage::python
