// Device choice, requirement checks, target descriptions and the program cache.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "stowage/backend/opencl.h"
#include "stowage/backend/program_cache.h"
#include "stowage/bytecode/target.h"
#include "stowage/vm/vm.h"
#include "bytecode/bytecode_test_util.h"

namespace stowage {
namespace {

TEST(OpenCLTest, StatusNamesAreReadable) {
  EXPECT_STREQ(opencl::status_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
  EXPECT_STREQ(opencl::status_name(CL_INVALID_WORK_GROUP_SIZE), "CL_INVALID_WORK_GROUP_SIZE");
  EXPECT_STREQ(opencl::status_name(-9999), "CL_UNKNOWN_ERROR");
  EXPECT_EQ(opencl::cl_error(CL_INVALID_VALUE, "clCreateBuffer").message(),
            "OpenCL error CL_INVALID_VALUE (-30) from clCreateBuffer");
}

TEST(OpenCLTest, TheDefaultDeviceExistsAndIsChosen) {
  auto devices = opencl::list_devices();
  ASSERT_FALSE(devices.empty()) << "no OpenCL device: PoCL should be installed";
  auto chosen = opencl::select_device("", {});
  ASSERT_TRUE(chosen) << chosen.error().message();
  EXPECT_EQ(opencl::select_device("opencl:0", {})->spec, "opencl:0");
}

// The image capabilities the list reports are the driver's answers, device by device
// in the list's order (platforms, then their devices).
TEST(OpenCLTest, ImageCapabilitiesAreTheDriversAnswers) {
  auto devices = opencl::list_devices();
  size_t index = 0;
  cl_uint num_platforms = 0;
  ASSERT_EQ(clGetPlatformIDs(0, nullptr, &num_platforms), CL_SUCCESS);
  std::vector<cl_platform_id> platforms(num_platforms);
  ASSERT_EQ(clGetPlatformIDs(num_platforms, platforms.data(), nullptr), CL_SUCCESS);
  for (cl_platform_id platform : platforms) {
    cl_uint n = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS) continue;
    std::vector<cl_device_id> ids(n);
    ASSERT_EQ(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr), CL_SUCCESS);
    for (cl_device_id id : ids) {
      ASSERT_LT(index, devices.size());
      const auto& d = devices[index++];
      size_t size = 0;
      ASSERT_EQ(clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, 0, nullptr, &size), CL_SUCCESS);
      std::string extensions(size, '\0');
      ASSERT_EQ(clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, size, extensions.data(), nullptr), CL_SUCCESS);
      cl_uint pitch = 0, read_write = 0;
      const bool v2 = d.version.rfind("OpenCL 1.", 0) != 0;
      if (v2 || extensions.find("cl_khr_image2d_from_buffer") != std::string::npos) {
        ASSERT_EQ(clGetDeviceInfo(id, CL_DEVICE_IMAGE_PITCH_ALIGNMENT, sizeof pitch, &pitch, nullptr), CL_SUCCESS);
      }
      if (v2) {
        ASSERT_EQ(clGetDeviceInfo(id, CL_DEVICE_MAX_READ_WRITE_IMAGE_ARGS, sizeof read_write, &read_write, nullptr),
                  CL_SUCCESS);
      }
      EXPECT_EQ(d.image_pitch_alignment, pitch) << d.summary();
      EXPECT_EQ(d.read_write_image_args, read_write) << d.summary();
      const std::string caps = d.capabilities();
      if (d.image_support) {
        EXPECT_NE(caps.find(pitch > 0 ? fmt::format("over buffers: rows {} pixels apart", pitch) : "over buffers: no"),
                  std::string::npos)
            << caps;
        EXPECT_NE(caps.find(read_write > 0 ? fmt::format("read_write: {} arguments", read_write) : "read_write: no"),
                  std::string::npos)
            << caps;
      } else {
        EXPECT_EQ(caps.rfind("no images, ", 0), 0u) << caps;
      }
    }
  }
  EXPECT_EQ(index, devices.size());
}

TEST(OpenCLTest, CapabilitiesAreOneLine) {
  opencl::DeviceInfo device;
  device.image_support = true;
  device.max_image2d_width = 16384;
  device.max_image2d_height = 8192;
  device.image_pitch_alignment = 64;
  device.svm_coarse_grain = true;
  device.fp64 = true;
  device.local_mem_bytes = 48 * 1024;
  EXPECT_EQ(device.capabilities(),
            "images up to 16384 x 8192 (over buffers: rows 64 pixels apart; read_write: no), coarse-grained SVM: yes, "
            "fp16: no, fp64: yes, local memory 48 KiB");
}

TEST(OpenCLTest, UnknownDevicesAreNamedInTheError) {
  auto n = opencl::list_devices().size();
  auto bad = opencl::select_device("opencl:99", {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), fmt::format("device 'opencl:99' does not exist: there are {} OpenCL devices "
                                               "(opencl:0 to opencl:{})",
                                               n, n - 1));
  auto none = opencl::select_device("no-such-device-name", {});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find("no OpenCL device matches 'no-such-device-name'"), std::string::npos);
}

TEST(OpenCLTest, UnmetRequirementsNameWhatIsMissing) {
  opencl::DeviceInfo device;
  device.spec = "opencl:0";
  device.name = "tiny";
  device.image_support = false;
  device.fp16 = false;
  device.base_addr_align_bytes = 512;
  device.max_alloc_bytes = 1 << 20;
  Requirements req;
  req.features = kFeatureFp16;
  ScopeRequirement global;
  global.scope = "global";
  global.max_storage_bytes = 2 << 20;
  global.offset_alignment = 128;
  req.scopes = {global};
  EXPECT_EQ(opencl::unmet_requirements(device, req),
            "device opencl:0 (tiny) lacks: cl_khr_fp16 (float16 kernels); scope 'global' needs a buffer of 2097152 "
            "bytes, the device allocates at most 1048576; scope 'global' places tensors at offsets aligned to 128 "
            "bytes, the device needs 512 (CL_DEVICE_MEM_BASE_ADDR_ALIGN) for sub-buffers and offers no "
            "coarse-grained SVM");
  req.features = 0;
  req.scopes[0].max_storage_bytes = 4096;
  req.scopes[0].offset_alignment = 1024;
  EXPECT_EQ(opencl::unmet_requirements(device, req), "");
}

// Kernels take SVM pointers where the device offers SVM: a tensor may then sit at
// an offset its sub-buffer could not start at, unless the VM keeps sub-buffers.
TEST(OpenCLTest, OffsetsBelowTheBaseAlignmentNeedSvmPointers) {
  opencl::DeviceInfo device;
  device.spec = "opencl:0";
  device.name = "gpu";
  device.base_addr_align_bytes = 512;
  device.max_alloc_bytes = 1 << 20;
  device.svm_coarse_grain = true;
  Requirements req;
  ScopeRequirement global;
  global.scope = "global";
  global.max_storage_bytes = 4096;
  global.offset_alignment = 16;
  req.scopes = {global};
  EXPECT_EQ(opencl::unmet_requirements(device, req), "");
  EXPECT_EQ(opencl::unmet_requirements(device, req, opencl::BufferViews::kSubBuffers),
            "device opencl:0 (gpu) lacks: scope 'global' places tensors at offsets aligned to 16 bytes, the device "
            "needs 512 (CL_DEVICE_MEM_BASE_ADDR_ALIGN) for sub-buffers; with SVM on (VmOptions::svm) it needs none");
}

TEST(OpenCLTest, AVmRefusesADeviceThatLacksWhatTheExecutableNeeds) {
  Executable exe = testing::make_add_mul_executable();
  exe.requirements.scopes[0].max_storage_bytes = uint64_t{1} << 62;  // no device allocates that
  auto vm = vm::VirtualMachine::create(std::make_shared<const Executable>(exe));
  ASSERT_FALSE(vm);
  EXPECT_NE(vm.error().message().find("scope 'global.vtcm' needs a buffer of 4611686018427387904 bytes"),
            std::string::npos)
      << vm.error().message();
  EXPECT_EQ(vm.error().kind(), ErrorKind::kUnsupported);
}

TEST(TargetTest, TheShippedTargetDescribesItsScopes) {
  auto target = TargetDesc::load("opencl");
  ASSERT_TRUE(target) << target.error().message();
  const ScopeDesc* vtcm = target->find_scope("global.vtcm");
  ASSERT_NE(vtcm, nullptr);
  EXPECT_EQ(vtcm->name, "global.onchip");
  EXPECT_TRUE(vtcm->onchip);
  EXPECT_EQ(vtcm->capacity, 262144u);
  EXPECT_EQ(vtcm->fallback, "global");
  EXPECT_EQ(target->find_scope("global")->alignment, 128u);
  EXPECT_EQ(target->find_scope("global.texture")->kind, ScopeKind::kImage2d);
  EXPECT_EQ(target->find_scope("nowhere"), nullptr);
}

TEST(TargetTest, TheGpuTargetPlacesTensorsAtSixteenByteOffsetsForSvmPointers) {
  auto target = TargetDesc::load("opencl-gpu");
  ASSERT_TRUE(target) << target.error().message();
  EXPECT_EQ(target->name, "opencl-gpu");
  EXPECT_EQ(target->find_scope("global")->alignment, 16u);  // float4 loads; sub-buffers would need 512 on NVIDIA
  EXPECT_EQ(target->find_scope("global.vtcm")->alignment, 16u);
  EXPECT_EQ(TargetDesc::load("opencl")->find_scope("global")->alignment, 128u);  // sub-buffers on any device
  EXPECT_EQ(TargetDesc::builtin_names(), (std::vector<std::string>{"opencl", "opencl-gpu"}));
  // The operator library's defaults for it: 4x4 accumulators, split-K toward 512 work-groups.
  EXPECT_EQ(target->kernel_tuning.at("conv").at("CONV_WPT_M"), 4);
  EXPECT_EQ(target->kernel_tuning.at("launch").at("SPLIT_K_GROUPS"), 512);
  EXPECT_TRUE(TargetDesc::load("opencl")->kernel_tuning.empty());
}

TEST(TargetTest, BadDescriptionsGetOneClearError) {
  auto not_json = TargetDesc::from_json("{", "t.json");
  ASSERT_FALSE(not_json);
  EXPECT_EQ(not_json.error().message(), "target 't.json': not valid JSON");
  auto bad_align = TargetDesc::from_json(R"({"scopes": [{"name": "g", "alignment": 3}]})", "t.json");
  EXPECT_EQ(bad_align.error().message(), "target 't.json': scope 'g': alignment 3 is not a power of two");
  auto bad_fallback = TargetDesc::from_json(R"({"scopes": [{"name": "g", "fallback": "h"}]})", "t.json");
  EXPECT_EQ(bad_fallback.error().message(), "target 't.json': scope 'g': fallback 'h' is not a scope of the target");
  auto bad_kind = TargetDesc::from_json(R"({"scopes": [{"name": "g", "kind": "disk"}]})", "t.json");
  EXPECT_EQ(bad_kind.error().message(), "target 't.json': scope 'g': kind 'disk' is neither 'buffer' nor 'image2d'");
  auto bad_kernels = TargetDesc::from_json(R"({"scopes": [], "kernels": {"conv": {"CONV_TILE_M": 6.5}}})", "t.json");
  EXPECT_EQ(bad_kernels.error().message(), "target 't.json': kernels: 'conv.CONV_TILE_M' must be an integer");
  auto bad_family = TargetDesc::from_json(R"({"scopes": [], "kernels": {"conv": 64}})", "t.json");
  EXPECT_EQ(bad_family.error().message(), "target 't.json': kernels: 'conv' must be an object of integer constants");
  auto missing = TargetDesc::load("no-such-target");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(),
            "target 'no-such-target' is neither a shipped target (opencl, opencl-gpu) nor a readable file");
}

TEST(ProgramCacheTest, ASecondContextLoadsTheBinaryFromDisk) {
  auto dir = std::filesystem::temp_directory_path() / fmt::format("stowage-cache-test-{}", ::getpid());
  std::filesystem::remove_all(dir);
  ::setenv("STOWAGE_CACHE_DIR", dir.c_str(), 1);
  auto device = opencl::select_device("", {}).value_or_throw();
  KernelUnit unit{"u", testing::make_add_mul_executable().units[0].source};
  {
    auto ctx = opencl::Context::create(device).value_or_throw();
    opencl::ProgramCache cache(ctx);
    ASSERT_TRUE(cache.program(unit));
    ASSERT_TRUE(cache.program(unit));  // once per context
    EXPECT_EQ(cache.stats().built_from_source, 1u);
    EXPECT_EQ(cache.stats().loaded_from_disk, 0u);
  }
  {
    auto ctx = opencl::Context::create(device).value_or_throw();
    opencl::ProgramCache cache(ctx);
    ASSERT_TRUE(cache.program(unit));
    EXPECT_EQ(cache.stats().built_from_source, 0u);
    EXPECT_EQ(cache.stats().loaded_from_disk, 1u);
  }
  // A corrupt cache file is rebuilt from source, not trusted.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::FILE* f = std::fopen(entry.path().c_str(), "wb");
    std::fputs("garbage", f);
    std::fclose(f);
  }
  {
    auto ctx = opencl::Context::create(device).value_or_throw();
    opencl::ProgramCache cache(ctx);
    ASSERT_TRUE(cache.program(unit));
    EXPECT_EQ(cache.stats().built_from_source, 1u);
  }
  ::unsetenv("STOWAGE_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

TEST(ProgramCacheTest, BuildFailuresNameTheUnit) {
  auto device = opencl::select_device("", {}).value_or_throw();
  auto ctx = opencl::Context::create(device).value_or_throw();
  opencl::ProgramCache cache(ctx);
  auto program = cache.program(KernelUnit{"broken", "__kernel void k(__global int* a) { a[0] = undefined_thing; }"});
  ASSERT_FALSE(program);
  EXPECT_EQ(program.error().message().rfind("kernel unit 'broken': OpenCL build failed with CL_BUILD_PROGRAM_FAILURE", 0),
            0u)
      << program.error().message();
}

}  // namespace
}  // namespace stowage
