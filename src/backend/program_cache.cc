#include "stowage/backend/program_cache.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace stowage::opencl {
namespace {

// FNV-1a: a stable 64-bit key for cache file names (not a security boundary; the
// driver validates binaries it is given).
uint64_t fnv1a(uint64_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  // Separate fields so that ("ab","c") and ("a","bc") differ.
  hash ^= 0xff;
  hash *= 1099511628211ull;
  return hash;
}

uint64_t cache_key(const KernelUnit& unit, const DeviceInfo& device) {
  uint64_t h = 14695981039346656037ull;
  for (std::string_view part : {std::string_view(unit.source), std::string_view(ProgramCache::kBuildOptions),
                                std::string_view(device.name), std::string_view(device.vendor),
                                std::string_view(device.platform), std::string_view(device.version),
                                std::string_view(device.driver)}) {
    h = fnv1a(h, part);
  }
  return h;
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  if (size > 0) clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

std::vector<unsigned char> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

void write_file_atomically(const std::filesystem::path& path, const std::vector<unsigned char>& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return;
  auto tmp = path;
  tmp += fmt::format(".tmp{}", static_cast<unsigned long>(std::rand()));
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return;
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

std::vector<unsigned char> program_binary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) != CL_SUCCESS || size == 0) {
    return {};
  }
  std::vector<unsigned char> binary(size);
  unsigned char* ptr = binary.data();
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr) != CL_SUCCESS) return {};
  return binary;
}

}  // namespace

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
  uint64_t key = cache_key(unit, context_->info());
  if (auto it = programs_.find(key); it != programs_.end()) return it->second;
  auto built = build(unit, key);
  if (!built) return built.error();
  programs_.emplace(key, *built);
  return *built;
}

Expected<cl_program> ProgramCache::build(const KernelUnit& unit, uint64_t key) {
  cl_device_id device = context_->device();
  std::string dir = kernel_cache_dir();
  std::filesystem::path file;
  if (!dir.empty()) {
    file = std::filesystem::path(dir) / fmt::format("{:016x}.bin", key);
    std::vector<unsigned char> binary = read_file(file);
    if (!binary.empty()) {
      const unsigned char* ptr = binary.data();
      size_t size = binary.size();
      cl_int binary_status = CL_SUCCESS;
      cl_int status = CL_SUCCESS;
      cl_program program =
          clCreateProgramWithBinary(context_->context(), 1, &device, &size, &ptr, &binary_status, &status);
      if (status == CL_SUCCESS && binary_status == CL_SUCCESS &&
          clBuildProgram(program, 1, &device, kBuildOptions, nullptr, nullptr) == CL_SUCCESS) {
        ++stats_.loaded_from_disk;
        return program;
      }
      if (program != nullptr) clReleaseProgram(program);
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
    return Error(ErrorKind::kRuntime, fmt::format("kernel unit '{}': OpenCL build failed with {} on {}: {}",
                                                  unit.name, status_name(status), context_->info().name, log));
  }
  ++stats_.built_from_source;
  if (!file.empty()) {
    auto binary = program_binary(program);
    if (!binary.empty()) write_file_atomically(file, binary);
  }
  return program;
}

}  // namespace stowage::opencl
