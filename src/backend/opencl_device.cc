// Device discovery, the load-time requirements check, and device choice.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include "stowage/backend/opencl.h"

namespace stowage::opencl {
namespace {

std::string device_string(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string value(size, '\0');
  if (clGetDeviceInfo(device, what, size, value.data(), nullptr) != CL_SUCCESS) return {};
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

std::string platform_string(cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  if (clGetPlatformInfo(platform, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
  std::string value(size, '\0');
  if (clGetPlatformInfo(platform, what, size, value.data(), nullptr) != CL_SUCCESS) return {};
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

template <typename T>
T device_value(cl_device_id device, cl_device_info what) {
  T value{};
  if (clGetDeviceInfo(device, what, sizeof(T), &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}

std::vector<uint64_t> work_item_sizes(cl_device_id device) {
  auto dims = device_value<cl_uint>(device, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
  if (dims == 0 || dims > 64) return {};
  std::vector<size_t> sizes(dims);
  if (clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(size_t), sizes.data(), nullptr) !=
      CL_SUCCESS) {
    return {};
  }
  return std::vector<uint64_t>(sizes.begin(), sizes.end());
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

struct RawDevice {
  DeviceInfo info;
  cl_device_id id;
};

// Queries of OpenCL 2.0 are asked only of such devices: a 1.2 driver may not know them.
bool opencl_2_or_later(const std::string& version) {
  // CL_DEVICE_VERSION is "OpenCL <major>.<minor> <vendor text>".
  return version.size() >= 8 && version.compare(0, 7, "OpenCL ") == 0 && version[7] >= '2' && version[7] <= '9';
}

// CL_DEVICE_SVM_CAPABILITIES; 0 where it is unknown.
cl_device_svm_capabilities svm_capabilities(cl_device_id id, const std::string& version) {
  if (!opencl_2_or_later(version)) return 0;
  cl_device_svm_capabilities caps = 0;
  if (clGetDeviceInfo(id, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, nullptr) != CL_SUCCESS) return 0;
  return caps;
}

std::vector<RawDevice> enumerate_once() {
  std::vector<RawDevice> devices;
  cl_uint num_platforms = 0;
  if (clGetPlatformIDs(0, nullptr, &num_platforms) != CL_SUCCESS || num_platforms == 0) return devices;
  std::vector<cl_platform_id> platforms(num_platforms);
  if (clGetPlatformIDs(num_platforms, platforms.data(), nullptr) != CL_SUCCESS) return devices;
  for (cl_platform_id platform : platforms) {
    cl_uint num_devices = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &num_devices) != CL_SUCCESS) continue;
    std::vector<cl_device_id> ids(num_devices);
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, num_devices, ids.data(), nullptr) != CL_SUCCESS) continue;
    for (cl_device_id id : ids) {
      DeviceInfo info;
      info.spec = fmt::format("opencl:{}", devices.size());
      info.name = device_string(id, CL_DEVICE_NAME);
      info.vendor = device_string(id, CL_DEVICE_VENDOR);
      info.platform = platform_string(platform, CL_PLATFORM_NAME);
      info.platform_version = platform_string(platform, CL_PLATFORM_VERSION);
      info.version = device_string(id, CL_DEVICE_VERSION);
      info.driver = device_string(id, CL_DRIVER_VERSION);
      info.type = device_value<cl_device_type>(id, CL_DEVICE_TYPE);
      info.image_support = device_value<cl_bool>(id, CL_DEVICE_IMAGE_SUPPORT) == CL_TRUE;
      info.max_image2d_width = device_value<size_t>(id, CL_DEVICE_IMAGE2D_MAX_WIDTH);
      info.max_image2d_height = device_value<size_t>(id, CL_DEVICE_IMAGE2D_MAX_HEIGHT);
      info.base_addr_align_bytes = device_value<cl_uint>(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
      info.global_mem_bytes = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
      info.max_alloc_bytes = device_value<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      info.local_mem_bytes = device_value<cl_ulong>(id, CL_DEVICE_LOCAL_MEM_SIZE);
      info.max_work_group_size = device_value<size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      info.max_work_item_sizes = work_item_sizes(id);
      info.address_bits = device_value<cl_uint>(id, CL_DEVICE_ADDRESS_BITS);
      std::string extensions = device_string(id, CL_DEVICE_EXTENSIONS);
      info.fp16 = extensions.find("cl_khr_fp16") != std::string::npos;
      info.fp64 = extensions.find("cl_khr_fp64") != std::string::npos;
      info.svm_coarse_grain = svm_capabilities(id, info.version) & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER;
      // Images over buffers are core in OpenCL 2.x, optional in 3.0 (a pitch alignment
      // of 0 where not offered), and the extension on a 1.2 device answers the same query.
      if (opencl_2_or_later(info.version) || extensions.find("cl_khr_image2d_from_buffer") != std::string::npos) {
        info.image_pitch_alignment = device_value<cl_uint>(id, CL_DEVICE_IMAGE_PITCH_ALIGNMENT);
      }
      if (opencl_2_or_later(info.version)) {
        info.read_write_image_args = device_value<cl_uint>(id, CL_DEVICE_MAX_READ_WRITE_IMAGE_ARGS);
      }
      devices.push_back({std::move(info), id});
    }
  }
  return devices;
}

// The devices, enumerated once per process. The ICD loader and drivers are not
// safe to enumerate from several threads at once (a driver's first
// clGetPlatformIDs initialises it), and the devices do not change while a process
// runs, so every VM, on any thread, shares this one list.
const std::vector<RawDevice>& enumerate() {
  static std::once_flag once;
  static std::vector<RawDevice> devices;
  std::call_once(once, [] { devices = enumerate_once(); });
  return devices;
}

bool is_gpu(const DeviceInfo& d) { return (d.type & CL_DEVICE_TYPE_GPU) != 0; }

}  // namespace

std::string DeviceInfo::summary() const {
  return fmt::format("{}: {} ({}, {}, driver {})", spec, name, platform, version, driver);
}

std::string DeviceInfo::capabilities() const {
  std::string images = "no images";
  if (image_support) {
    images = fmt::format("images up to {} x {} (over buffers: {}; read_write: {})", max_image2d_width,
                         max_image2d_height,
                         image_pitch_alignment > 0 ? fmt::format("rows {} pixels apart", image_pitch_alignment) : "no",
                         read_write_image_args > 0 ? fmt::format("{} arguments", read_write_image_args) : "no");
  }
  return fmt::format("{}, coarse-grained SVM: {}, fp16: {}, fp64: {}, local memory {} KiB", images,
                     svm_coarse_grain ? "yes" : "no", fp16 ? "yes" : "no", fp64 ? "yes" : "no", local_mem_bytes / 1024);
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  for (const auto& d : enumerate()) out.push_back(d.info);
  return out;
}

std::string unmet_requirements(const DeviceInfo& device, const Requirements& req, BufferViews views) {
  const bool pointers = views == BufferViews::kSvmWhereOffered && device.svm_coarse_grain;
  std::vector<std::string> missing;
  if ((req.features & kFeatureImages) && !device.image_support) missing.push_back("image support");
  if ((req.features & kFeatureFp16) && !device.fp16) missing.push_back("cl_khr_fp16 (float16 kernels)");
  if ((req.features & kFeatureFp64) && !device.fp64) missing.push_back("cl_khr_fp64 (float64 kernels)");
  for (const auto& scope : req.scopes) {
    if (scope.kind == ScopeKind::kImage2d) {
      if (!device.image_support) {
        missing.push_back(fmt::format("scope '{}' needs image support", scope.scope));
      } else if (scope.max_image_width > device.max_image2d_width || scope.max_image_height > device.max_image2d_height) {
        missing.push_back(fmt::format("scope '{}' needs images of {}x{} pixels, the device allows {}x{}", scope.scope,
                                      scope.max_image_height, scope.max_image_width, device.max_image2d_height,
                                      device.max_image2d_width));
      }
      continue;
    }
    if (scope.kind == ScopeKind::kBuffer) {
      if (scope.max_storage_bytes > device.max_alloc_bytes) {
        missing.push_back(fmt::format("scope '{}' needs a buffer of {} bytes, the device allocates at most {}",
                                      scope.scope, scope.max_storage_bytes, device.max_alloc_bytes));
      }
      // Without SVM, tensor views are sub-buffers, whose origin must be a multiple
      // of the device's base address alignment; SVM pointers may point anywhere.
      if (!pointers && scope.offset_alignment != 0 && device.base_addr_align_bytes != 0 &&
          scope.offset_alignment % device.base_addr_align_bytes != 0) {
        missing.push_back(fmt::format(
            "scope '{}' places tensors at offsets aligned to {} bytes, the device needs {} "
            "(CL_DEVICE_MEM_BASE_ADDR_ALIGN) for sub-buffers{}",
            scope.scope, scope.offset_alignment, device.base_addr_align_bytes,
            device.svm_coarse_grain ? "; with SVM on (VmOptions::svm) it needs none"
                                    : " and offers no coarse-grained SVM"));
      }
    }
  }
  if (missing.empty()) return {};
  return fmt::format("device {} ({}) lacks: {}", device.spec, device.name, fmt::join(missing, "; "));
}

Expected<DeviceInfo> select_device(std::string_view spec, const Requirements& requirements, BufferViews views) {
  std::string chosen(spec);
  if (chosen.empty()) {
    if (const char* env = std::getenv("STOWAGE_DEVICE"); env != nullptr && *env != '\0') chosen = env;
  }
  auto devices = list_devices();
  if (devices.empty()) {
    return Error(ErrorKind::kUnsupported,
                 "no OpenCL device found (is an ICD installed? PoCL's CPU device is the default)");
  }
  std::vector<const DeviceInfo*> candidates;
  if (chosen.empty() || chosen == "any") {
    for (const auto& d : devices) {
      if (is_gpu(d)) candidates.push_back(&d);
    }
    for (const auto& d : devices) {
      if (!is_gpu(d)) candidates.push_back(&d);
    }
  } else if (chosen.starts_with("opencl:")) {
    std::string_view index_text = std::string_view(chosen).substr(7);
    size_t index = 0;
    bool numeric = !index_text.empty() && index_text.size() < 6 &&
                   std::all_of(index_text.begin(), index_text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (numeric) index = std::stoul(std::string(index_text));
    if (!numeric || index >= devices.size()) {
      return Error(ErrorKind::kInvalidInput,
                   fmt::format("device '{}' does not exist: there are {} OpenCL devices (opencl:0 to opencl:{})",
                               chosen, devices.size(), devices.size() - 1));
    }
    candidates.push_back(&devices[index]);
  } else {
    std::string needle = lower(chosen);
    for (const auto& d : devices) {
      bool match = (needle == "gpu" && is_gpu(d)) || (needle == "cpu" && (d.type & CL_DEVICE_TYPE_CPU)) ||
                   lower(d.name).find(needle) != std::string::npos ||
                   lower(d.platform).find(needle) != std::string::npos;
      if (match) candidates.push_back(&d);
    }
    if (candidates.empty()) {
      std::vector<std::string> names;
      for (const auto& d : devices) names.push_back(d.spec + " " + d.name);
      return Error(ErrorKind::kInvalidInput,
                   fmt::format("no OpenCL device matches '{}' (devices: {})", chosen, fmt::join(names, ", ")));
    }
  }
  std::string first_reason;
  for (const DeviceInfo* d : candidates) {
    std::string reason = unmet_requirements(*d, requirements, views);
    if (reason.empty()) return *d;
    if (first_reason.empty()) first_reason = reason;
  }
  return Error(ErrorKind::kUnsupported, first_reason);
}

Expected<std::shared_ptr<Context>> Context::create(const DeviceInfo& device, bool profiling_queue) {
  const std::vector<RawDevice>& raw = enumerate();
  const RawDevice* found = nullptr;
  for (const auto& d : raw) {
    if (d.info.spec == device.spec) found = &d;
  }
  if (found == nullptr) {
    return Error(ErrorKind::kUnsupported, fmt::format("device {} disappeared", device.spec));
  }
  std::shared_ptr<Context> ctx(new Context());
  ctx->info_ = found->info;
  ctx->device_ = found->id;
  cl_int status = CL_SUCCESS;
  ctx->context_ = clCreateContext(nullptr, 1, &ctx->device_, nullptr, nullptr, &status);
  if (status != CL_SUCCESS) return cl_error(status, "clCreateContext");
  ctx->queue_ = clCreateCommandQueue(ctx->context_, ctx->device_, profiling_queue ? CL_QUEUE_PROFILING_ENABLE : 0,
                                    &status);
  if (status != CL_SUCCESS) return cl_error(status, "clCreateCommandQueue");
  return ctx;
}

Context::~Context() {
  if (queue_) {
    clFinish(queue_);
    clReleaseCommandQueue(queue_);
  }
  if (context_) clReleaseContext(context_);
}

}  // namespace stowage::opencl
