#include "stowage/ir/kernel_reader.h"

#include "cl_headers.h"

#include <fmt/format.h>

#include <algorithm>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "libclang_handles.h"

namespace stowage::ir {
namespace {

// A position inside a unit's source, 1-based as Clang reports it.
struct UnitPos {
  uint32_t line = 0;
  uint32_t col = 0;
};

// Formats a message about `unit`, at `pos` when known, in the forms the header
// documents. `loc` is where the unit's source starts in the text form, if it
// came from one: the first source line shares its line with that position.
std::string unit_message(const KernelSourceUnit& unit, std::optional<UnitPos> pos,
                         std::string_view message) {
  if (unit.loc.line == 0) {
    if (!pos) return fmt::format("kernel unit '{}': error: {}", unit.name, message);
    return fmt::format("kernel unit '{}' {}:{}: error: {}", unit.name, pos->line, pos->col, message);
  }
  if (!pos) {
    return fmt::format("{}:{}: error: in kernel unit '{}': {}", unit.loc.line, unit.loc.col, unit.name,
                       message);
  }
  uint64_t text_line = uint64_t{unit.loc.line} + pos->line - 1;
  uint64_t text_col = pos->line == 1 ? uint64_t{unit.loc.col} + pos->col - 1 : pos->col;
  return fmt::format("{}:{}: error: in kernel unit '{}' ({}:{}): {}", text_line, text_col, unit.name,
                     pos->line, pos->col, message);
}

Error unit_error(const KernelSourceUnit& unit, std::optional<UnitPos> pos, std::string_view message) {
  return Error(ErrorKind::kInvalidInput, unit_message(unit, pos, message));
}

// Where `location` lies in the unit's own text; nullopt inside included headers.
std::optional<UnitPos> unit_position(CXSourceLocation location) {
  if (!clang_Location_isFromMainFile(location)) return std::nullopt;
  CXFile file = nullptr;
  unsigned line = 0;
  unsigned col = 0;
  clang_getExpansionLocation(location, &file, &line, &col, nullptr);
  if (file == nullptr || line == 0) return std::nullopt;
  return UnitPos{line, col};
}

// The first error Clang reported, if any.
Status first_clang_error(const KernelSourceUnit& unit, CXTranslationUnit tu) {
  unsigned count = clang_getNumDiagnostics(tu);
  for (unsigned i = 0; i < count; ++i) {
    clang_c::DiagnosticHandle diagnostic(clang_getDiagnostic(tu, i));
    CXDiagnosticSeverity severity = clang_getDiagnosticSeverity(diagnostic.get());
    if (severity != CXDiagnostic_Error && severity != CXDiagnostic_Fatal) continue;
    std::string text = clang_c::take_string(clang_getDiagnosticSpelling(diagnostic.get()));
    return unit_error(unit, unit_position(clang_getDiagnosticLocation(diagnostic.get())), text);
  }
  return Status::ok();
}

// The 1-based line and column (in bytes) of byte `offset` of `source`.
UnitPos position_of(std::string_view source, uint64_t offset) {
  std::string_view before = source.substr(0, static_cast<size_t>(offset));
  size_t line_start = before.rfind('\n');
  line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
  auto line = static_cast<uint32_t>(std::count(before.begin(), before.end(), '\n') + 1);
  return UnitPos{line, static_cast<uint32_t>(before.size() - line_start + 1)};
}

// A kernel may include Stowage's shipped headers and nothing else: the compiler
// inlines those, and any other file would be read on the machine that runs the
// bytecode (the loader refuses such units). Checked before libclang sees the
// unit, so that it reads no file of this machine either.
Status foreign_file_access(const KernelSourceUnit& unit) {
  std::optional<FileAccess> access = first_foreign_file_access(unit.source);
  if (!access) return Status::ok();
  return unit_error(unit, position_of(unit.source, access->offset),
                    fmt::format("'{}' is not allowed: a kernel may include only the headers Stowage ships, each as "
                                "'#include <stowage/NAME>' on a line of its own ({})",
                                access->form, shipped_header_names()));
}

// The element type of a buffer or scalar: a dtype and a vector width.
struct ElementType {
  DType dtype;
  uint8_t lanes = 1;
};

// OpenCL C's arithmetic types. `char` is signed in OpenCL C whatever the host's
// convention, so both of Clang's plain-char kinds are int8. bool has no defined
// size on the device and is not listed.
std::optional<DType> scalar_dtype(CXTypeKind kind) {
  switch (kind) {
    case CXType_Char_S:
    case CXType_Char_U:
    case CXType_SChar: return DType::kInt8;
    case CXType_UChar: return DType::kUInt8;
    case CXType_Short: return DType::kInt16;
    case CXType_UShort: return DType::kUInt16;
    case CXType_Int: return DType::kInt32;
    case CXType_UInt: return DType::kUInt32;
    case CXType_Long: return DType::kInt64;
    case CXType_ULong: return DType::kUInt64;
    case CXType_Half: return DType::kFloat16;
    case CXType_Float: return DType::kFloat32;
    case CXType_Double: return DType::kFloat64;
    default: return std::nullopt;
  }
}

bool is_opencl_vector_width(long long lanes) {
  return lanes == 2 || lanes == 3 || lanes == 4 || lanes == 8 || lanes == 16;
}

// A canonical scalar or OpenCL vector type as an element type; nullopt for
// anything else. The size check guards the kind-to-dtype table against a target
// whose types differ from OpenCL C's.
std::optional<ElementType> element_type(CXType type) {
  ElementType element{DType::kUInt8, 1};
  CXType scalar = type;
  if (type.kind == CXType_ExtVector) {
    long long lanes = clang_getNumElements(type);
    if (!is_opencl_vector_width(lanes)) return std::nullopt;
    element.lanes = static_cast<uint8_t>(lanes);
    scalar = clang_getCanonicalType(clang_getElementType(type));
  }
  std::optional<DType> dtype = scalar_dtype(scalar.kind);
  if (!dtype) return std::nullopt;
  long long size = clang_Type_getSizeOf(scalar);
  if (size < 0 || static_cast<uint64_t>(size) != dtype_bytes(*dtype)) return std::nullopt;
  element.dtype = *dtype;
  return element;
}

// libclang 14 reports OpenCL address spaces as Clang's LangAS values.
enum OpenClAddressSpace : unsigned { kGlobal = 1, kLocal = 2, kConstant = 3 };

std::optional<KernelParam> pointer_param(CXType pointee) {
  std::optional<ElementType> element = element_type(pointee);
  if (!element) return std::nullopt;
  KernelParam param;
  param.dtype = element->dtype;
  param.lanes = element->lanes;
  switch (clang_getAddressSpace(pointee)) {
    case kGlobal:
      param.kind = KernelParamKind::kGlobalBuffer;
      param.is_const = clang_isConstQualifiedType(pointee) != 0;
      return param;
    case kConstant:
      param.kind = KernelParamKind::kConstantBuffer;
      param.is_const = true;
      return param;
    case kLocal:
      param.kind = KernelParamKind::kLocal;
      return param;
    default: return std::nullopt;
  }
}

// The parameter's kind and element type, from its canonical type (typedefs
// resolved); nullopt when Stowage cannot bind it.
std::optional<KernelParam> classify_param(CXType declared) {
  CXType type = clang_getCanonicalType(declared);
  switch (type.kind) {
    case CXType_Pointer: return pointer_param(clang_getCanonicalType(clang_getPointeeType(type)));
    case CXType_OCLImage2dRO: {
      KernelParam param;
      param.kind = KernelParamKind::kImage2dRead;
      return param;
    }
    case CXType_OCLImage2dWO: {
      KernelParam param;
      param.kind = KernelParamKind::kImage2dWrite;
      return param;
    }
    default: break;
  }
  std::optional<ElementType> element = element_type(type);
  if (!element) return std::nullopt;
  KernelParam param;
  param.kind = KernelParamKind::kScalar;
  param.dtype = element->dtype;
  param.lanes = element->lanes;
  return param;
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The type as the user wrote it: Clang spells the implicit private address
// space of parameters, which the source never mentions, so the word goes.
std::string written_type(CXType type) {
  constexpr std::string_view kPrivate = "__private";
  std::string text = clang_c::take_string(clang_getTypeSpelling(type));
  size_t at = 0;
  while ((at = text.find(kPrivate, at)) != std::string::npos) {
    size_t end = at + kPrivate.size();
    bool whole_word = (at == 0 || !is_identifier_char(text[at - 1])) &&
                      (end == text.size() || !is_identifier_char(text[end]));
    if (!whole_word) {
      at = end;
      continue;
    }
    if (end < text.size() && text[end] == ' ') {
      ++end;
    } else if (at > 0 && text[at - 1] == ' ') {
      --at;
    }
    text.erase(at, end - at);
  }
  return text;
}

constexpr std::string_view kImageOffsetType = "stowage_image_offset";

// A parameter declared with the typedef of <stowage/image_offset.cl.h> (const or
// not): the typedef's name, not its type int2, is what marks an image offset.
bool spelled_image_offset(CXType declared) {
  std::string text = written_type(declared);
  std::string_view spelled = text;
  constexpr std::string_view kConst = "const ";
  if (spelled.starts_with(kConst)) spelled.remove_prefix(kConst.size());
  return spelled == kImageOffsetType;
}

std::optional<KernelParam> image_offset_param(CXType declared) {
  std::optional<ElementType> element = element_type(clang_getCanonicalType(declared));
  if (!element || element->dtype != DType::kInt32 || element->lanes != 2) return std::nullopt;
  KernelParam param;
  param.kind = KernelParamKind::kImageOffset;
  param.dtype = DType::kInt32;
  param.lanes = 2;
  return param;
}

Expected<KernelSignature> read_signature(const KernelSourceUnit& unit, uint32_t unit_index,
                                         CXCursor kernel) {
  KernelSignature signature;
  signature.name = clang_c::take_string(clang_getCursorSpelling(kernel));
  signature.unit = unit_index;
  int count = clang_Cursor_getNumArguments(kernel);
  for (int i = 0; i < count; ++i) {
    CXCursor argument = clang_Cursor_getArgument(kernel, static_cast<unsigned>(i));
    std::string name = clang_c::take_string(clang_getCursorSpelling(argument));
    CXType type = clang_getCursorType(argument);
    auto where = [&] { return unit_position(clang_getCursorLocation(argument)); };
    bool is_offset = spelled_image_offset(type);
    std::optional<KernelParam> param = is_offset ? image_offset_param(type) : classify_param(type);
    if (!param) {
      return unit_error(unit, where(),
                        fmt::format("kernel '{}' parameter {} '{}': type '{}' is not supported{}",
                                    signature.name, i, name, written_type(type),
                                    is_offset ? " (stowage_image_offset must be int2)" : ""));
    }
    if (is_offset && (signature.params.empty() || !signature.params.back().is_image())) {
      return unit_error(unit, where(),
                        fmt::format("kernel '{}' parameter {} '{}': a stowage_image_offset must directly follow the "
                                    "image2d_t parameter whose offset it is",
                                    signature.name, i, name));
    }
    param->name = std::move(name);
    signature.params.push_back(std::move(*param));
  }
  return signature;
}

// Clang gives every __kernel function the OpenCL kernel calling convention,
// which libclang reports as unexposed; ordinary functions have the C one. This
// holds however the qualifier is spelled (kernel, __kernel, a macro).
bool is_kernel(CXCursor function) {
  return clang_getFunctionTypeCallingConv(clang_getCursorType(function)) == CXCallingConv_Unexposed;
}

struct KernelCursors {
  std::vector<CXCursor> definitions;        // in source order
  std::map<std::string, CXCursor> declared;  // first declaration of each name
};

KernelCursors find_kernels(CXTranslationUnit tu) {
  KernelCursors found;
  clang_visitChildren(
      clang_getTranslationUnitCursor(tu),
      [](CXCursor cursor, CXCursor, CXClientData data) {
        auto& kernels = *static_cast<KernelCursors*>(data);
        if (clang_getCursorKind(cursor) != CXCursor_FunctionDecl) return CXChildVisit_Continue;
        if (!clang_Location_isFromMainFile(clang_getCursorLocation(cursor))) return CXChildVisit_Continue;
        if (!is_kernel(cursor)) return CXChildVisit_Continue;
        if (clang_isCursorDefinition(cursor)) {
          kernels.definitions.push_back(cursor);
        } else {
          kernels.declared.emplace(clang_c::take_string(clang_getCursorSpelling(cursor)), cursor);
        }
        return CXChildVisit_Continue;
      },
      &found);
  return found;
}

// A declared kernel with no body could not be built on the device.
Status undefined_kernel(const KernelSourceUnit& unit, const KernelCursors& kernels) {
  std::set<std::string> defined;
  for (CXCursor cursor : kernels.definitions) {
    defined.insert(clang_c::take_string(clang_getCursorSpelling(cursor)));
  }
  for (const auto& [name, cursor] : kernels.declared) {
    if (defined.count(name)) continue;
    return unit_error(unit, unit_position(clang_getCursorLocation(cursor)),
                      fmt::format("kernel '{}' is declared but not defined", name));
  }
  return Status::ok();
}

// OpenCL C 1.2 with the default header (the built-in functions and types), as
// the device compiler sees it. Host system headers are left out: a kernel that
// includes one could not be built on the device.
constexpr const char* kClangArgs[] = {"-x",      "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header",
                                      "-nostdlibinc"};

// The signatures of the units read last, by source and entry width: libclang takes
// milliseconds a unit, and programs compiled in a loop (tests, the fuzzer, a Python
// session) repeat their units. Signatures do not depend on the unit's name or
// place; failures are not kept, since their messages do.
class SignatureMemo {
 public:
  std::optional<std::vector<KernelSignature>> find(const std::string& source, uint32_t entry_bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->entry_bytes != entry_bytes || it->source != source) continue;
      entries_.splice(entries_.begin(), entries_, it);  // most recent first
      return entries_.front().signatures;
    }
    return std::nullopt;
  }
  void add(const std::string& source, uint32_t entry_bytes, const std::vector<KernelSignature>& signatures) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_front({source, entry_bytes, signatures});
    if (entries_.size() > kCapacity) entries_.pop_back();
  }

 private:
  static constexpr size_t kCapacity = 16;
  struct Entry {
    std::string source;
    uint32_t entry_bytes;
    std::vector<KernelSignature> signatures;
  };
  std::mutex mutex_;
  std::list<Entry> entries_;
};

SignatureMemo& signature_memo() {
  static SignatureMemo memo;
  return memo;
}

Expected<std::vector<KernelSignature>> parse_kernel_signatures(const KernelSourceUnit& unit, uint32_t unit_index,
                                                               uint32_t table_entry_bytes);

}  // namespace

Expected<std::vector<KernelSignature>> read_kernel_signatures(const KernelSourceUnit& unit, uint32_t unit_index,
                                                              uint32_t table_entry_bytes) {
  STOWAGE_TRY(foreign_file_access(unit));
  if (auto known = signature_memo().find(unit.source, table_entry_bytes)) {
    for (KernelSignature& signature : *known) signature.unit = unit_index;
    return std::move(*known);
  }
  Expected<std::vector<KernelSignature>> read = parse_kernel_signatures(unit, unit_index, table_entry_bytes);
  if (read) signature_memo().add(unit.source, table_entry_bytes, *read);
  return read;
}

namespace {

Expected<std::vector<KernelSignature>> parse_kernel_signatures(const KernelSourceUnit& unit, uint32_t unit_index,
                                                               uint32_t table_entry_bytes) {
  if (Status loaded = clang_c::load_libclang(); !loaded) {
    return Error(loaded.error().kind(), fmt::format("kernel unit '{}': {}", unit.name, loaded.error().message()));
  }
  clang_c::IndexHandle index(clang_createIndex(/*excludeDeclarationsFromPCH=*/0, /*displayDiagnostics=*/0));
  std::string file_name = unit.name + ".cl";
  // The unit, then Stowage's shipped headers as virtual files under one include directory.
  std::vector<std::string> header_paths;
  for (const ClHeader& h : shipped_cl_headers()) {
    header_paths.push_back(fmt::format("{}/stowage/{}", kVirtualIncludeDir, h.name));
  }
  std::vector<CXUnsavedFile> files;
  files.push_back({file_name.c_str(), unit.source.data(), static_cast<unsigned long>(unit.source.size())});
  for (size_t i = 0; i < header_paths.size(); ++i) {
    const ClHeader& h = shipped_cl_headers()[i];
    files.push_back({header_paths[i].c_str(), h.text.data(), static_cast<unsigned long>(h.text.size())});
  }
  std::string include_arg = fmt::format("-I{}", kVirtualIncludeDir);
  std::string define_arg = "-D" + table_entry_define(table_entry_bytes);
  std::vector<const char*> args(std::begin(kClangArgs), std::end(kClangArgs));
  args.push_back(include_arg.c_str());
  args.push_back(define_arg.c_str());
  CXTranslationUnit raw_tu = nullptr;
  CXErrorCode code = clang_parseTranslationUnit2(index.get(), file_name.c_str(), args.data(),
                                                 static_cast<int>(args.size()), files.data(),
                                                 static_cast<unsigned>(files.size()), CXTranslationUnit_None, &raw_tu);
  clang_c::TranslationUnitHandle tu(raw_tu);
  if (code != CXError_Success || tu == nullptr) {
    return unit_error(unit, std::nullopt, fmt::format("libclang could not parse the unit (error code {})",
                                                      static_cast<int>(code)));
  }
  STOWAGE_TRY(first_clang_error(unit, tu.get()));

  KernelCursors kernels = find_kernels(tu.get());
  STOWAGE_TRY(undefined_kernel(unit, kernels));
  std::vector<KernelSignature> signatures;
  for (CXCursor cursor : kernels.definitions) {
    STOWAGE_TRY_ASSIGN(KernelSignature signature, read_signature(unit, unit_index, cursor));
    signatures.push_back(std::move(signature));
  }
  return signatures;
}

}  // namespace

Status read_module_kernels(Module& module, uint32_t table_entry_bytes, std::string_view file_name) {
  std::vector<std::vector<KernelSignature>> per_unit;
  std::map<std::string, uint32_t> defining_unit;
  for (uint32_t i = 0; i < module.units.size(); ++i) {
    const KernelSourceUnit& unit = module.units[i];
    Expected<std::vector<KernelSignature>> signatures = read_kernel_signatures(unit, i, table_entry_bytes);
    if (!signatures) {
      // A unit from the text form reports a position in it: name the file as the parser does.
      if (file_name.empty() || unit.loc.line == 0) return signatures.error();
      return Error(signatures.error().kind(), fmt::format("{}:{}", file_name, signatures.error().message()));
    }
    for (const KernelSignature& signature : *signatures) {
      auto [it, inserted] = defining_unit.emplace(signature.name, i);
      if (!inserted) {
        return unit_error(unit, std::nullopt,
                          fmt::format("kernel '{}' is already defined in kernel unit '{}'", signature.name,
                                      module.units[it->second].name));
      }
    }
    per_unit.push_back(signatures.take());
  }
  for (uint32_t i = 0; i < module.units.size(); ++i) module.units[i].signatures = std::move(per_unit[i]);
  return Status::ok();
}

}  // namespace stowage::ir
