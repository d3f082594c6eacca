// Compiling, saving and loading executables, and what they tell about memory.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <span>

#include "bindings.h"
#include "errors.h"
#include "executable_handle.h"
#include "stowage/bytecode/target.h"
#include "stowage/ir/compiler.h"
#include "stowage/ir/parser.h"
#include "stowage/ir/printer.h"
#include "stowage/bytecode/file.h"

namespace py = pybind11;

namespace stowage::python {
namespace {

ExecutableHandle handle_of(Executable executable) {
  return ExecutableHandle{std::make_shared<const Executable>(std::move(executable)), std::nullopt};
}

// The bytes of tensor constant `c` of `exe`, read out of its storage's segments.
std::shared_ptr<const std::vector<std::byte>> constant_bytes(const Executable& exe, const TensorConstant& c) {
  const ConstantStorage& storage = exe.constant_storages[c.storage];
  auto out = std::make_shared<std::vector<std::byte>>(*checked_nbytes(c.shape, c.dtype));  // the loader checked it
  for (const DataSegment& segment : storage.segments) {
    uint64_t begin = std::max(segment.offset, c.offset);
    uint64_t end = std::min(segment.offset + segment.bytes.size(), c.offset + out->size());
    if (begin >= end) continue;
    std::memcpy(out->data() + (begin - c.offset), segment.bytes.data() + (begin - segment.offset), end - begin);
  }
  return out;
}

// The module as compiled: kept from compile, else read back from the debug section,
// its large constants (written `external` there) filled from the constant sections.
ir::Module compiled_module(const ExecutableHandle& h) {
  if (h.module) return *h.module;
  if (h.executable->debug_text.empty()) {
    throw StowageError(
        ErrorKind::kInvalidInput,
        "the executable carries no IR text (its debug section is empty), so its module cannot be read back");
  }
  ir::Module module = unwrap(ir::parse_module(h.executable->debug_text, "<debug section>"));
  for (ir::ConstantTensor& c : module.constants) {
    if (c.data) continue;
    for (const TensorConstant& tc : h.executable->tensor_constants) {
      if (tc.name == c.name) c.data = constant_bytes(*h.executable, tc);
    }
  }
  return module;
}

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kTensor:
      return "Tensor";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kOther:
      return "Object";
    case ValueKind::kTuple:
      return "Tuple";
  }
  return "?";
}

py::dict describe_value(const ValueDesc& v) {
  py::dict d;
  d["name"] = v.name;
  d["kind"] = value_kind_name(v.kind);
  if (v.kind == ValueKind::kTensor) {
    d["shape"] = py::tuple(py::cast(v.shape));
    d["dtype"] = std::string(dtype_name(v.dtype));
  }
  if (v.kind == ValueKind::kTuple) {
    py::list fields;
    for (const ValueDesc& field : v.fields) fields.append(describe_value(field));
    d["fields"] = fields;
  }
  return d;
}

py::list describe_functions(const Executable& exe) {
  py::list out;
  for (const Function& f : exe.functions) {
    py::dict d;
    d["name"] = f.name;
    py::list params;
    for (const ValueDesc& p : f.params) params.append(describe_value(p));
    d["params"] = params;
    d["result"] = describe_value(f.result);
    out.append(d);
  }
  return out;
}

// Image storages as [height, width] pixels and tensors in them as rectangles,
// by name, read from the compiled module (kept from compile, else read back from
// the debug section); empty when neither is at hand.
struct ImagePlaces {
  std::map<std::string, ImageExtent> storages;
  std::map<std::string, std::pair<ImageOffset, ImageExtent>> tensors;
};

ImagePlaces image_places(const ExecutableHandle& h, const std::string& function) {
  ImagePlaces out;
  std::optional<ir::Module> parsed;
  const ir::Module* module = h.module ? &*h.module : nullptr;
  if (module == nullptr && !h.executable->debug_text.empty()) {
    if (auto read = ir::parse_module(h.executable->debug_text, "<debug section>")) {
      parsed = read.take();
      module = &*parsed;
    }
  }
  const ir::Function* f = module != nullptr ? module->find_function(function) : nullptr;
  if (f == nullptr) return out;
  std::map<std::string, ImageLayout> layouts;
  for (const ScopeRequirement& scope : h.executable->requirements.scopes) layouts[scope.scope] = scope.layout;
  std::map<std::string, ImageLayout> storage_layout;
  for (const ir::Binding& b : f->bindings) {
    if (b.op == ir::Op::kAllocStorage && b.shape.size() == 2 && b.shape[0] >= 0 && b.shape[1] >= 0) {
      out.storages[b.result] = ImageExtent{static_cast<uint64_t>(b.shape[0]), static_cast<uint64_t>(b.shape[1])};
      storage_layout[b.result] = layouts.count(b.scope) ? layouts[b.scope] : ImageLayout::kNone;
    } else if (b.op == ir::Op::kAllocTensor && !b.vars.empty() && out.storages.count(b.vars[0])) {
      if (auto extent = image_extent(b.shape, storage_layout[b.vars[0]])) {
        out.tensors[b.result] = {b.image_offset, *extent};
      }
    }
  }
  return out;
}

py::dict describe_layout(const FunctionLayout& layout, const ImagePlaces& images) {
  py::list scopes;
  for (const LayoutScope& scope : layout.scopes) {
    py::list storages;
    for (const LayoutStorage& s : scope.storages) {
      py::list tensors;
      for (const LayoutTensor& t : s.tensors) {
        py::dict td;
        td["name"] = t.name;
        td["offset"] = t.offset;
        td["nbytes"] = t.nbytes;
        td["start"] = t.start;
        td["end"] = t.end;
        if (auto it = images.tensors.find(t.name); it != images.tensors.end()) {
          td["x"] = it->second.first.x;
          td["y"] = it->second.first.y;
          td["width"] = it->second.second.width;
          td["height"] = it->second.second.height;
        }
        tensors.append(td);
      }
      py::dict sd;
      sd["name"] = s.name;
      sd["nbytes"] = s.nbytes;
      sd["start"] = s.start;
      sd["end"] = s.end;
      if (auto it = images.storages.find(s.name); it != images.storages.end()) {
        sd["width"] = it->second.width;
        sd["height"] = it->second.height;
      }
      sd["tensors"] = tensors;
      storages.append(sd);
    }
    py::dict d;
    d["scope"] = scope.scope;
    d["storages"] = storages;
    d["storage_bytes"] = scope.storage_bytes();
    d["tensor_bytes"] = scope.tensor_bytes();
    d["lower_bound"] = scope.lower_bound;
    scopes.append(d);
  }
  py::dict out;
  out["function"] = layout.function;
  out["steps"] = layout.steps;
  out["scopes"] = scopes;
  return out;
}

ExecutableHandle compile(const ir::Module& module, const std::string& target) {
  TargetDesc desc = unwrap(TargetDesc::load(target));
  ir::CompileResult result = unwrap(ir::compile_module(module, desc));
  ExecutableHandle h = handle_of(std::move(result.executable));
  h.module = std::move(result.module);
  h.memory = std::move(result.memory);
  return h;
}

// A path as the file system takes it: str (non-UTF-8 names arrive as surrogate
// escapes), bytes or os.PathLike, through os.fsencode.
std::string file_system_path(const py::handle& path, std::string_view what) {
  py::object encoded;
  try {
    encoded = py::module_::import("os").attr("fsencode")(path);
  } catch (py::error_already_set& e) {
    std::string type = py::str(py::type::of(path).attr("__name__"));
    if (e.matches(PyExc_TypeError)) {
      throw StowageError(ErrorKind::kInvalidInput,
                         fmt::format("{}: the path must be str, bytes or os.PathLike, not {}", what, type));
    }
    std::string shown = py::str(py::repr(path));
    throw StowageError(ErrorKind::kInvalidInput,
                       fmt::format("{}: the path {} cannot be encoded for the file system", what, shown));
  }
  return std::string(py::bytes(encoded));
}

}  // namespace

void bind_executable(py::module_& m) {
  py::class_<ExecutableHandle>(m, "ExecutableHandle")
      .def("save",
           [](const ExecutableHandle& h, const py::object& path) {
             check(write_bytecode_file(*h.executable, file_system_path(path, "save")));
           })
      .def("to_bytes",
           [](const ExecutableHandle& h) {
             std::vector<uint8_t> bytes = write_bytecode(*h.executable);
             return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
           })
      .def_property_readonly("text",
                             [](const ExecutableHandle& h) {
                               return h.module ? ir::print_module(*h.module,
                                                                 ir::PrintOptions{ir::kDebugTextConstantBytes})
                                               : h.executable->debug_text;
                             })
      .def_property_readonly("module", [](const ExecutableHandle& h) { return compiled_module(h); })
      .def_property_readonly("functions", [](const ExecutableHandle& h) { return describe_functions(*h.executable); })
      .def_property_readonly("constant_bytes",
                             [](const ExecutableHandle& h) {
                               // scope -> bytes of the storages holding its constants (made once per VM)
                               py::dict out;
                               for (const ConstantStorage& s : h.executable->constant_storages) {
                                 py::str scope(s.scope);
                                 uint64_t before = out.contains(scope) ? out[scope].cast<uint64_t>() : 0;
                                 out[scope] = before + s.nbytes;
                               }
                               return out;
                             })
      // The planner's figures as the file carries them: the same after compile and
      // after load.
      .def_property_readonly("planner_report",
                             [](const ExecutableHandle& h) {
                               py::list rows;
                               for (const ScopePlan& s : h.executable->memory_plans) {
                                 py::dict row;
                                 row["function"] = s.function;
                                 row["scope"] = s.scope;
                                 row["tensors"] = s.tensors;
                                 row["planned_bytes"] = s.planned_bytes;
                                 row["lower_bound"] = s.lower_bound;
                                 row["naive_bytes"] = s.naive_bytes;
                                 row["reuse_only_bytes"] = s.reuse_only_bytes;
                                 row["spilled"] = s.spilled;
                                 row["spilled_bytes"] = s.spilled_bytes;
                                 row["discontiguous"] = s.discontiguous;
                                 row["blocks"] = s.blocks;
                                 row["seconds"] = s.seconds;
                                 rows.append(row);
                               }
                               return rows;
                             })
      .def("memory_layout", [](const ExecutableHandle& h, const std::string& function) {
        const Executable& exe = *h.executable;
        for (const FunctionLayout& layout : exe.memory_layouts) {
          if (layout.function == function) return describe_layout(layout, image_places(h, function));
        }
        if (exe.find_function(function) < 0) {
          throw StowageError(ErrorKind::kInvalidInput, fmt::format("memory layout: no function '{}'", function));
        }
        throw StowageError(ErrorKind::kInvalidInput,
                           fmt::format("memory layout: the executable carries none for function '{}' (it was "
                                       "written without its memory layout section)", function));
      });

  // Compiling and loading run without the GIL: other Python threads go on.
  m.def("compile", &compile, py::arg("module"), py::arg("target"), py::call_guard<py::gil_scoped_release>());
  m.def("load", [](const py::object& path) {
    std::string file = file_system_path(path, "load");
    py::gil_scoped_release unlocked;
    return handle_of(unwrap(read_bytecode_file(file)));
  });
  m.def("from_bytes", [](const py::bytes& data) {
    char* start = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(data.ptr(), &start, &size) != 0) throw py::error_already_set();
    auto bytes = std::span(reinterpret_cast<const uint8_t*>(start), static_cast<size_t>(size));
    return handle_of(unwrap(read_bytecode(bytes)));
  });
  m.def("target_names", &TargetDesc::builtin_names);
  // A target's description as Python values: what the operator library needs to
  // know of it (image extents, scope alignments, its kernel defaults).
  m.def("target_description", [](const std::string& name) {
    TargetDesc desc = unwrap(TargetDesc::load(name));
    py::list scopes;
    for (const ScopeDesc& scope : desc.scopes) {
      py::dict d;
      d["name"] = scope.name;
      d["kind"] = scope.kind == ScopeKind::kImage2d ? "image2d" : "buffer";
      d["alignment"] = scope.alignment;
      d["capacity"] = scope.capacity;
      d["layout"] = scope.layout;
      scopes.append(d);
    }
    py::dict out;
    out["name"] = desc.name;
    out["max_image_width"] = desc.max_image_width;
    out["max_image_height"] = desc.max_image_height;
    out["scopes"] = scopes;
    out["kernels"] = desc.kernel_tuning;
    return out;
  });
}

}  // namespace stowage::python
