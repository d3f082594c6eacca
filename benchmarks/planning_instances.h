// Packing instances for the planner benchmark and tests: activation tensors of
// real networks, built from their exact layer shapes, and seeded random ones.
//
// Networks run at batch 1 on a 224x224 RGB image in float32, one op after the
// other in the order of their reference implementations (torchvision).
// Convolution, batch norm and activation are one op (batch norm folded into
// the convolution, the activation fused, as inference compilers do); a
// residual add is its own op, with ResNet's ReLU fused into it. Every op
// writes one new tensor. A tensor is alive from the op that writes it to the
// last op that reads it, both included: item [producer, last reader + 1). The
// network's input and its output (the logits) are parameters and results,
// which the planner does not pack, so only intermediate tensors are items.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stowage/ir/packing.h"

namespace stowage::bench {

// Records ops in execution order and the tensors they read and write.
class ActivationGraph {
 public:
  struct Tensor {
    int64_t height, width, channels;
  };
  // The network input: not an item.
  int input(int64_t height, int64_t width, int64_t channels) {
    return add_tensor("input", {height, width, channels}, -1);
  }
  // An op reading `inputs` and writing a new tensor of the given shape.
  int op(const std::string& name, std::initializer_list<int> inputs, Tensor shape) {
    const int step = steps_++;
    for (int t : inputs) last_use_[t] = step;
    return add_tensor(name, shape, step);
  }
  int conv(const std::string& name, int x, int64_t channels, int64_t stride) {
    const Tensor& in = shapes_[x];
    return op(name, {x}, {(in.height + stride - 1) / stride, (in.width + stride - 1) / stride, channels});
  }
  const Tensor& shape(int t) const { return shapes_[t]; }

  // The intermediate tensors as items (`output` is excluded, as is the input).
  std::vector<ir::PackItem> items(int output) const {
    std::vector<ir::PackItem> result;
    for (size_t t = 0; t < shapes_.size(); ++t) {
      if (producer_[t] < 0 || static_cast<int>(t) == output) continue;
      const Tensor& s = shapes_[t];
      const int64_t last = last_use_[t] < 0 ? producer_[t] : last_use_[t];
      result.push_back({names_[t], producer_[t], last + 1,
                        static_cast<uint64_t>(s.height * s.width * s.channels) * sizeof(float), 1});
    }
    return result;
  }

 private:
  int add_tensor(const std::string& name, Tensor shape, int producer) {
    names_.push_back(name + "." + std::to_string(names_.size()));
    shapes_.push_back(shape);
    producer_.push_back(producer);
    last_use_.push_back(-1);
    return static_cast<int>(shapes_.size()) - 1;
  }
  int steps_ = 0;
  std::vector<std::string> names_;
  std::vector<Tensor> shapes_;
  std::vector<int> producer_, last_use_;
};

// ResNet-18 (basic blocks) or ResNet-50 (bottlenecks), torchvision layout.
inline std::vector<ir::PackItem> resnet_activations(int depth) {
  ActivationGraph g;
  int x = g.input(224, 224, 3);
  x = g.conv("conv1", x, 64, 2);                                           // 112x112x64
  x = g.op("maxpool", {x}, {56, 56, 64});
  const bool bottleneck = depth >= 50;
  const std::vector<int> blocks = bottleneck ? std::vector<int>{3, 4, 6, 3} : std::vector<int>{2, 2, 2, 2};
  int64_t in_channels = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const int64_t width = int64_t{64} << layer;
    const int64_t out_channels = bottleneck ? 4 * width : width;
    for (int b = 0; b < blocks[layer]; ++b) {
      const int64_t stride = (layer > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(layer + 1) + "." + std::to_string(b);
      int out;
      if (bottleneck) {
        int t = g.conv(name + ".conv1", x, width, 1);
        t = g.conv(name + ".conv2", t, width, stride);
        out = g.conv(name + ".conv3", t, out_channels, 1);
      } else {
        int t = g.conv(name + ".conv1", x, width, stride);
        out = g.conv(name + ".conv2", t, out_channels, 1);
      }
      int identity = x;
      if (stride != 1 || in_channels != out_channels) identity = g.conv(name + ".downsample", x, out_channels, stride);
      x = g.op(name + ".add_relu", {out, identity}, g.shape(out));
      in_channels = out_channels;
    }
  }
  x = g.op("avgpool", {x}, {1, 1, in_channels});
  const int logits = g.op("fc", {x}, {1, 1, 1000});
  return g.items(logits);
}

// MobileNetV2 (width 1.0), torchvision layout.
inline std::vector<ir::PackItem> mobilenet_v2_activations() {
  ActivationGraph g;
  int x = g.input(224, 224, 3);
  x = g.conv("features.0", x, 32, 2);  // 112x112x32
  struct Stage {
    int64_t expand, channels, repeats, stride;
  };
  const Stage stages[] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t in_channels = 32;
  int index = 1;
  for (const Stage& stage : stages) {
    for (int r = 0; r < stage.repeats; ++r, ++index) {
      const int64_t stride = r == 0 ? stage.stride : 1;
      const std::string name = "features." + std::to_string(index);
      int t = x;
      if (stage.expand != 1) t = g.conv(name + ".expand", t, in_channels * stage.expand, 1);
      t = g.conv(name + ".depthwise", t, g.shape(t).channels, stride);
      t = g.conv(name + ".project", t, stage.channels, 1);
      if (stride == 1 && in_channels == stage.channels) t = g.op(name + ".add", {t, x}, g.shape(t));
      x = t;
      in_channels = stage.channels;
    }
  }
  x = g.conv("features.18", x, 1280, 1);  // 7x7x1280
  x = g.op("avgpool", {x}, {1, 1, 1280});
  const int logits = g.op("classifier", {x}, {1, 1, 1000});
  return g.items(logits);
}

// A seeded random instance with its own generator (splitmix64) and integer
// arithmetic only, so the same seed gives the same instance everywhere.
// Births are uniform over [0, n); lifetimes and sizes are roughly log-uniform
// (a power of two picked uniformly, then a value uniform up to the next one):
// lifetimes in [1, 255] steps, sizes in [64 B, 1 MiB), multiples of 64.
inline std::vector<ir::PackItem> random_instance(uint32_t n, uint64_t seed) {
  uint64_t state = seed;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  auto log_uniform = [&](unsigned octaves) {
    const uint64_t base = uint64_t{1} << (next() % octaves);
    return base + next() % base;
  };
  std::vector<ir::PackItem> items;
  items.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    const int64_t lower = static_cast<int64_t>(next() % n);
    const int64_t lifetime = static_cast<int64_t>(log_uniform(8));
    items.push_back({std::to_string(i), lower, lower + lifetime, 64 * log_uniform(14), 1});
  }
  return items;
}

}  // namespace stowage::bench
