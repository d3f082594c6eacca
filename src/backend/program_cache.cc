#include "stowage/backend/program_cache.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include "sha256.h"
#include "stowage/bytecode/kernel_source.h"
#include "stowage/support/file.h"

namespace stowage::opencl {
namespace {

constexpr std::string_view kMagic("STWKBIN\x01", 8);
constexpr size_t kHeaderBytes = 8 + 32 + 32 + 8;
// Bumped whenever what the key covers changes meaning.
constexpr std::string_view kKeyVersion = "stowage kernel cache key 2";
constexpr size_t kMaxMessageDiagnostic = 400;

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t get_u64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(in[i])} << (8 * i);
  return v;
}

std::string_view digest_bytes(const Sha256Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

Sha256Digest key_digest(const KernelUnit& unit, const DeviceInfo& device) {
  Sha256Fields h;
  h.add(kKeyVersion).add(unit.source).add(ProgramCache::kBuildOptions);
  h.add(device.name).add(device.vendor).add(device.version).add(device.platform).add(device.platform_version);
  h.add(device.driver);
  return h.finish();
}

std::string cache_file_bytes(const std::string& key, std::string_view binary) {
  std::string out;
  out.reserve(kHeaderBytes + binary.size());
  out += kMagic;
  for (size_t i = 0; i + 1 < key.size(); i += 2) {
    out += static_cast<char>(std::stoi(key.substr(i, 2), nullptr, 16));
  }
  out += digest_bytes(sha256(binary));
  put_u64(out, binary.size());
  out += binary;
  return out;
}

// The binary a cache file holds, when the file is whole and made for `key`.
std::optional<std::string_view> cached_binary(std::string_view file, const std::string& key) {
  if (file.size() < kHeaderBytes || file.substr(0, 8) != kMagic) return std::nullopt;
  Sha256Digest stored{};
  std::memcpy(stored.data(), file.data() + 8, stored.size());
  if (to_hex(stored) != key) return std::nullopt;
  std::string_view binary = file.substr(kHeaderBytes);
  if (get_u64(file.substr(72, 8)) != binary.size() || binary.empty()) return std::nullopt;
  if (file.substr(40, 32) != digest_bytes(sha256(binary))) return std::nullopt;
  return binary;
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  if (size > 0) clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The log's first error line (else its first line), shortened to one line of
// bounded length: drivers print many lines and a count ("2 errors generated.").
std::string first_diagnostic(std::string_view log) {
  std::string_view first;
  std::string_view first_error;
  size_t pos = 0;
  while (pos <= log.size() && first_error.empty()) {
    size_t end = log.find('\n', pos);
    if (end == std::string_view::npos) end = log.size();
    std::string_view line = trim(log.substr(pos, end - pos));
    if (!line.empty() && first.empty()) first = line;
    if (line.find("error") != std::string_view::npos) first_error = line;
    pos = end + 1;
  }
  std::string line(first_error.empty() ? first : first_error);
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  if (line.size() > kMaxMessageDiagnostic) line = line.substr(0, kMaxMessageDiagnostic) + "...";
  return line.empty() ? "the driver gave no build log" : line;
}

// Where STOWAGE_BUILD_LOG asks for the full log, with what became of the request.
std::string save_full_log(std::string_view log) {
  const char* path = std::getenv("STOWAGE_BUILD_LOG");
  if (path == nullptr || *path == '\0') return "set STOWAGE_BUILD_LOG=FILE for the full log";
  Status written = write_file_atomically(path, log, "build log");
  if (!written) return written.error().message();
  return fmt::format("full log in '{}'", path);
}

std::string program_binary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) != CL_SUCCESS || size == 0 ||
      size > ProgramCache::kMaxFileBytes - kHeaderBytes) {
    return {};
  }
  std::string binary(size, '\0');
  auto* ptr = reinterpret_cast<unsigned char*>(binary.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr) != CL_SUCCESS) return {};
  return binary;
}

// Creates the missing directories of `dir` with mode 0700, then checks that the
// cache may be trusted: a directory of this user that no one else can write to.
bool prepare_private_dir(const std::string& dir) {
  std::filesystem::path path(dir);
  std::filesystem::path partial;
  for (const auto& part : path) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return st.st_uid == ::geteuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

}  // namespace

std::string program_cache_key(const KernelUnit& unit, const DeviceInfo& device) {
  return to_hex(key_digest(unit, device));
}

std::string kernel_cache_dir() {
  if (const char* dir = std::getenv("STOWAGE_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    if (std::string_view(dir) == "off") return {};
    return dir;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (std::filesystem::path(xdg) / "stowage" / "kernels").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (std::filesystem::path(home) / ".cache" / "stowage" / "kernels").string();
  }
  return {};
}

ProgramCache::ProgramCache(std::shared_ptr<Context> context) : context_(std::move(context)) {}

ProgramCache::~ProgramCache() {
  for (auto& [key, program] : programs_) clReleaseProgram(program);
}

Expected<cl_program> ProgramCache::program(const KernelUnit& unit) {
  std::string key = program_cache_key(unit, context_->info());
  if (auto it = programs_.find(key); it != programs_.end()) return it->second;
  // The loader refuses such units; an Executable built in memory gets the same check
  // before a driver's preprocessor could read a file of this machine.
  std::vector<FileAccess> accesses = find_file_accesses(unit.source);
  if (!accesses.empty()) {
    return Error(ErrorKind::kInvalidInput,
                 fmt::format("kernel unit '{}': '{}' at byte {} of its source could read a file of this machine; "
                             "units must be self-contained",
                             unit.name, accesses[0].form, accesses[0].offset));
  }
  auto built = build(unit, key);
  if (!built) return built.error();
  programs_.emplace(key, *built);
  return *built;
}

std::optional<cl_program> ProgramCache::load(const std::string& key, const std::string& file) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) return std::nullopt;  // not cached yet
  Expected<std::string> bytes = read_regular_file(file, kMaxFileBytes, "kernel cache file", Symlinks::kRefuse);
  if (!bytes) {
    ++stats_.refused_from_disk;
    return std::nullopt;
  }
  std::optional<std::string_view> binary = cached_binary(*bytes, key);
  if (!binary) {
    ++stats_.refused_from_disk;
    return std::nullopt;
  }
  cl_device_id device = context_->device();
  const auto* ptr = reinterpret_cast<const unsigned char*>(binary->data());
  size_t size = binary->size();
  cl_int binary_status = CL_SUCCESS;
  cl_int status = CL_SUCCESS;
  cl_program program = clCreateProgramWithBinary(context_->context(), 1, &device, &size, &ptr, &binary_status, &status);
  if (status == CL_SUCCESS && binary_status == CL_SUCCESS &&
      clBuildProgram(program, 1, &device, kBuildOptions, nullptr, nullptr) == CL_SUCCESS) {
    return program;
  }
  if (program != nullptr) clReleaseProgram(program);
  ++stats_.refused_from_disk;
  return std::nullopt;
}

Expected<cl_program> ProgramCache::build(const KernelUnit& unit, const std::string& key) {
  cl_device_id device = context_->device();
  std::string dir = kernel_cache_dir();
  std::string file;
  if (!dir.empty() && prepare_private_dir(dir)) {
    file = (std::filesystem::path(dir) / (key + ".bin")).string();
    if (std::optional<cl_program> program = load(key, file)) {
      ++stats_.loaded_from_disk;
      return *program;
    }
  }
  const char* source = unit.source.c_str();
  size_t length = unit.source.size();
  cl_int status = CL_SUCCESS;
  cl_program program = clCreateProgramWithSource(context_->context(), 1, &source, &length, &status);
  if (status != CL_SUCCESS) return cl_error(status, "clCreateProgramWithSource");
  status = clBuildProgram(program, 1, &device, kBuildOptions, nullptr, nullptr);
  if (status != CL_SUCCESS) {
    std::string log = build_log(program, device);
    clReleaseProgram(program);
    return Error(ErrorKind::kRuntime,
                 fmt::format("kernel unit '{}': OpenCL build failed with {} on {}: {} ({})", unit.name,
                             status_name(status), context_->info().name, first_diagnostic(log), save_full_log(log)));
  }
  ++stats_.built_from_source;
  if (!file.empty()) {
    std::string binary = program_binary(program);
    // A cache that cannot be written costs a rebuild next time, nothing more.
    if (!binary.empty()) (void)write_file_atomically(file, cache_file_bytes(key, binary), "kernel cache file");
  }
  return program;
}

}  // namespace stowage::opencl
