// The kernel cache trusts nothing it reads: a file is used only when it holds the
// key it is named by and a binary whose SHA-256 it records; the key covers the
// source and everything about the device and driver; files are neither read nor
// written through symbolic links; the directory is private. Build errors are one
// line, with the driver's whole log where STOWAGE_BUILD_LOG says.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "bytecode/bytecode_test_util.h"
#include "stowage/backend/opencl.h"
#include "stowage/backend/program_cache.h"

namespace stowage::opencl {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSourceA = "__kernel void kernel_a(__global int* x) { x[get_global_id(0)] += 1; }\n";
constexpr const char* kSourceB = "__kernel void kernel_b(__global int* x) { x[get_global_id(0)] += 2; }\n";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class ProgramCacheFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("stowage-cache-files-{}", ::getpid());
    fs::remove_all(dir_);
    ::setenv("STOWAGE_CACHE_DIR", dir_.c_str(), 1);
    device_ = select_device("", {}).value_or_throw();
  }
  void TearDown() override {
    ::unsetenv("STOWAGE_CACHE_DIR");
    ::unsetenv("STOWAGE_BUILD_LOG");
    fs::remove_all(dir_);
  }

  // Builds or loads `unit` in a fresh context; returns what the cache did.
  ProgramCacheStats use(const KernelUnit& unit) {
    auto context = Context::create(device_).value_or_throw();
    ProgramCache cache(context);
    Expected<cl_program> program = cache.program(unit);
    EXPECT_TRUE(program) << program.error().message();
    if (program) {
      // The program holds this unit's kernel, not another's.
      std::string name = unit.source.find("kernel_a") != std::string::npos ? "kernel_a" : "kernel_b";
      cl_int status = CL_SUCCESS;
      cl_kernel kernel = clCreateKernel(*program, name.c_str(), &status);
      EXPECT_EQ(status, CL_SUCCESS) << name;
      if (kernel) clReleaseKernel(kernel);
    }
    return cache.stats();
  }

  fs::path file_of(const KernelUnit& unit) const { return dir_ / (program_cache_key(unit, device_) + ".bin"); }

  fs::path dir_;
  DeviceInfo device_;
};

TEST_F(ProgramCacheFiles, TheKeyCoversTheSourceTheDeviceAndTheDriver) {
  KernelUnit unit{"u", kSourceA};
  std::set<std::string> keys = {program_cache_key(unit, device_)};
  KernelUnit changed_source{"u", std::string(kSourceA) + " "};
  keys.insert(program_cache_key(changed_source, device_));
  for (std::string DeviceInfo::*field : {&DeviceInfo::name, &DeviceInfo::vendor, &DeviceInfo::version,
                                         &DeviceInfo::platform, &DeviceInfo::platform_version, &DeviceInfo::driver}) {
    DeviceInfo other = device_;
    other.*field += "+";
    keys.insert(program_cache_key(unit, other));
  }
  EXPECT_EQ(keys.size(), 8u);
  // Fields are length-prefixed: moving a byte from one field to the next changes the key.
  DeviceInfo a = device_, b = device_;
  a.name = "ab";
  a.vendor = "c";
  b.name = "a";
  b.vendor = "bc";
  EXPECT_NE(program_cache_key(unit, a), program_cache_key(unit, b));
  EXPECT_EQ(program_cache_key(unit, device_).size(), 64u);  // SHA-256 in hexadecimal
}

TEST_F(ProgramCacheFiles, ASecondContextLoadsTheFileItWrote) {
  KernelUnit unit{"u", kSourceA};
  ProgramCacheStats first = use(unit);
  EXPECT_EQ(first.built_from_source, 1u);
  std::string bytes = read_file(file_of(unit));
  ASSERT_GT(bytes.size(), 80u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("STWKBIN\x01", 8));
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size |= uint64_t{static_cast<uint8_t>(bytes[72 + i])} << (8 * i);
  EXPECT_EQ(size, bytes.size() - 80);
  ProgramCacheStats second = use(unit);
  EXPECT_EQ(second.loaded_from_disk, 1u);
  EXPECT_EQ(second.built_from_source, 0u);
  EXPECT_EQ(second.refused_from_disk, 0u);
}

// Damage anywhere in a file (the header, the key, the binary, its length) makes
// it unused: the unit is built from source and the file replaced by one the next
// use loads. (Not compared byte for byte: PoCL's binary also holds the work-group
// functions its own cache had compiled, which tests running beside it change.)
TEST_F(ProgramCacheFiles, ADamagedFileIsRebuiltAndReplaced) {
  KernelUnit unit{"u", kSourceA};
  use(unit);
  const std::string good = read_file(file_of(unit));
  for (size_t at : {size_t{0}, size_t{9}, size_t{41}, size_t{72}, good.size() / 2, good.size() - 1}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x20);
    write_file(file_of(unit), bad);
    ProgramCacheStats stats = use(unit);
    EXPECT_EQ(stats.refused_from_disk, 1u) << "byte " << at;
    EXPECT_EQ(stats.built_from_source, 1u) << "byte " << at;
    const std::string replaced = read_file(file_of(unit));
    EXPECT_EQ(replaced.substr(0, 72), good.substr(0, 72)) << "byte " << at;  // magic, version and key
    ProgramCacheStats again = use(unit);
    EXPECT_EQ(again.loaded_from_disk, 1u) << "byte " << at;
    EXPECT_EQ(again.built_from_source, 0u) << "byte " << at;
  }
  write_file(file_of(unit), good.substr(0, good.size() - 1));  // truncated
  EXPECT_EQ(use(unit).refused_from_disk, 1u);
}

// A file made for one unit, put under another unit's name (a collision of the
// names, or a planted file), is not used for it: the file says whose it is.
TEST_F(ProgramCacheFiles, AFileOfAnotherKeyIsNotUsed) {
  KernelUnit a{"u", kSourceA}, b{"u", kSourceB};
  use(a);
  fs::copy_file(file_of(a), file_of(b));
  ProgramCacheStats stats = use(b);  // checks the program holds kernel_b
  EXPECT_EQ(stats.refused_from_disk, 1u);
  EXPECT_EQ(stats.built_from_source, 1u);
}

TEST_F(ProgramCacheFiles, LinksAreNeitherReadNorWrittenThrough) {
  KernelUnit unit{"u", kSourceA};
  use(unit);
  const std::string good = read_file(file_of(unit));
  fs::path victim = dir_ / "victim";
  write_file(victim, good);  // even a valid file is not read through a link
  fs::remove(file_of(unit));
  fs::create_symlink(victim, file_of(unit));
  ProgramCacheStats stats = use(unit);
  EXPECT_EQ(stats.refused_from_disk, 1u);
  EXPECT_EQ(stats.built_from_source, 1u);
  EXPECT_FALSE(fs::is_symlink(file_of(unit)));  // replaced by the new file
  write_file(victim, "untouched");
  fs::remove(file_of(unit));
  fs::create_symlink(victim, file_of(unit));
  use(unit);
  EXPECT_EQ(read_file(victim), "untouched");
}

TEST_F(ProgramCacheFiles, DirectoriesAreCreatedPrivateAndAnOpenOneIsNotUsed) {
  fs::path nested = dir_ / "a" / "b";
  ::setenv("STOWAGE_CACHE_DIR", nested.c_str(), 1);
  KernelUnit unit{"u", kSourceA};
  use(unit);
  for (const fs::path& d : {dir_, dir_ / "a", nested}) {
    struct stat st {};
    ASSERT_EQ(::stat(d.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
  }
  fs::path open = dir_ / "open";
  fs::create_directories(open);
  fs::permissions(open, fs::perms::all);  // anyone may write there
  ::setenv("STOWAGE_CACHE_DIR", open.c_str(), 1);
  EXPECT_EQ(use(unit).built_from_source, 1u);
  EXPECT_EQ(use(unit).built_from_source, 1u);
  EXPECT_TRUE(fs::is_empty(open));
}

TEST_F(ProgramCacheFiles, AUnitThatNamesAFileIsNotBuilt) {
  auto context = Context::create(device_).value_or_throw();
  ProgramCache cache(context);
  auto program = cache.program(KernelUnit{"u", std::string("#include \"/etc/passwd\"\n") + kSourceA});
  ASSERT_FALSE(program);
  EXPECT_EQ(program.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(program.error().message(),
            "kernel unit 'u': '#include' at byte 0 of its source could read a file of this machine; units must be "
            "self-contained");
  EXPECT_EQ(cache.stats().built_from_source, 0u);
}

// PoCL's log has several lines and a count ("1 error generated."): the error is one
// line, the first diagnostic; the whole log goes where STOWAGE_BUILD_LOG says.
TEST_F(ProgramCacheFiles, BuildErrorsAreOneLineWithTheFullLogOnRequest) {
  auto context = Context::create(device_).value_or_throw();
  KernelUnit broken{"broken", "__kernel void k(__global int* a) {\n  a[0] = undefined_thing;\n  a[1] = other;\n}\n"};
  {
    ProgramCache cache(context);
    auto program = cache.program(broken);
    ASSERT_FALSE(program);
    const std::string& message = program.error().message();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind("kernel unit 'broken': OpenCL build failed with CL_BUILD_PROGRAM_FAILURE on ", 0), 0u)
        << message;
    EXPECT_NE(message.find("undefined_thing"), std::string::npos) << message;
    EXPECT_EQ(message.find("'other'"), std::string::npos) << message;  // the first diagnostic only
    EXPECT_TRUE(message.ends_with("(set STOWAGE_BUILD_LOG=FILE for the full log)")) << message;
  }
  fs::create_directories(dir_);
  fs::path log = dir_ / "build.log";
  ::setenv("STOWAGE_BUILD_LOG", log.c_str(), 1);
  ProgramCache cache(context);
  auto program = cache.program(broken);
  ASSERT_FALSE(program);
  EXPECT_TRUE(program.error().message().ends_with(fmt::format("(full log in '{}')", log.string())))
      << program.error().message();
  std::string full = read_file(log);
  EXPECT_NE(full.find("undefined_thing"), std::string::npos) << full;
  EXPECT_NE(full.find("other"), std::string::npos) << full;
}

}  // namespace
}  // namespace stowage::opencl
