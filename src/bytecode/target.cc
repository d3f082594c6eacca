#include "stowage/bytecode/target.h"

#include <algorithm>

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "stowage/support/file.h"

namespace stowage {
namespace {

struct EmbeddedFile {
  const char* name;
  const char* text;
};

// Target descriptions are a few hundred bytes; a file past this is not one.
constexpr uint64_t kMaxTargetFileBytes = 1 << 20;

constexpr EmbeddedFile kEmbeddedTargets[] = {
#include "embedded_targets.inc"
};

Error target_error(std::string_view origin, const std::string& what) {
  return Error(ErrorKind::kInvalidInput, fmt::format("target '{}': {}", origin, what));
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

bool ScopeDesc::answers_to(std::string_view scope) const {
  if (name == scope) return true;
  for (const auto& alias : aliases) {
    if (alias == scope) return true;
  }
  return false;
}

ImageLayout ScopeDesc::image_layout() const {
  if (kind != ScopeKind::kImage2d) return ImageLayout::kNone;
  if (layout == "weight") return ImageLayout::kWeight;
  if (layout == "nhwc") return ImageLayout::kNhwc;
  return ImageLayout::kActivation;
}

const ScopeDesc* TargetDesc::find_scope(std::string_view scope) const {
  for (const auto& s : scopes) {
    if (s.answers_to(scope)) return &s;
  }
  return nullptr;
}

Expected<TargetDesc> TargetDesc::from_json(std::string_view text, std::string_view origin) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return target_error(origin, "not valid JSON");
  if (!doc.is_object()) return target_error(origin, "the top level must be an object");
  TargetDesc target;
  try {
    target.name = doc.value("name", std::string(origin));
    target.table_entry_bytes = doc.value("table_entry_bytes", 4u);
    target.max_image_width = doc.value("max_image_width", uint64_t{16384});
    target.max_image_height = doc.value("max_image_height", uint64_t{16384});
    if (target.table_entry_bytes != 4 && target.table_entry_bytes != 8) {
      return target_error(origin, "table_entry_bytes must be 4 or 8");
    }
    if (!doc.contains("scopes") || !doc["scopes"].is_array()) {
      return target_error(origin, "'scopes' must be an array");
    }
    for (const auto& js : doc["scopes"]) {
      ScopeDesc s;
      s.name = js.at("name").get<std::string>();
      std::string kind = js.value("kind", std::string("buffer"));
      if (kind == "buffer") {
        s.kind = ScopeKind::kBuffer;
      } else if (kind == "image2d") {
        s.kind = ScopeKind::kImage2d;
      } else {
        return target_error(origin, fmt::format("scope '{}': kind '{}' is neither 'buffer' nor 'image2d'", s.name, kind));
      }
      s.alignment = js.value("alignment", uint64_t{1});
      if (!is_power_of_two(s.alignment)) {
        return target_error(origin, fmt::format("scope '{}': alignment {} is not a power of two", s.name, s.alignment));
      }
      s.capacity = js.value("capacity", uint64_t{0});
      s.onchip = js.value("onchip", false);
      s.fallback = js.value("fallback", std::string());
      s.layout = js.value("layout", std::string());
      if (js.contains("aliases")) s.aliases = js["aliases"].get<std::vector<std::string>>();
      if (s.kind == ScopeKind::kImage2d && s.layout != "activation" && s.layout != "weight" && s.layout != "nhwc") {
        return target_error(origin, fmt::format("scope '{}': image layout must be 'activation', 'weight' or 'nhwc'", s.name));
      }
      target.scopes.push_back(std::move(s));
    }
    if (doc.contains("kernels")) {
      const auto& kernels = doc["kernels"];
      if (!kernels.is_object()) return target_error(origin, "'kernels' must be an object of kernel families");
      for (const auto& [family, constants] : kernels.items()) {
        if (!constants.is_object()) {
          return target_error(origin, fmt::format("kernels: '{}' must be an object of integer constants", family));
        }
        for (const auto& [constant, value] : constants.items()) {
          if (!value.is_number_integer()) {
            return target_error(origin, fmt::format("kernels: '{}.{}' must be an integer", family, constant));
          }
          target.kernel_tuning[family][constant] = value.get<int64_t>();
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return target_error(origin, e.what());
  }
  for (const auto& s : target.scopes) {
    if (!s.fallback.empty() && target.find_scope(s.fallback) == nullptr) {
      return target_error(origin, fmt::format("scope '{}': fallback '{}' is not a scope of the target", s.name, s.fallback));
    }
  }
  return target;
}

Expected<TargetDesc> TargetDesc::load(std::string_view name_or_path) {
  for (const auto& file : kEmbeddedTargets) {
    std::string_view file_name = file.name;
    if (file_name.substr(0, file_name.size() - 5) == name_or_path) {
      return from_json(file.text, name_or_path);
    }
  }
  std::string path(name_or_path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Error(ErrorKind::kIo, fmt::format("target '{}' is neither a shipped target ({}) nor a readable file",
                                             name_or_path, fmt::join(builtin_names(), ", ")));
  }
  auto text = read_regular_file(path, kMaxTargetFileBytes, "target file");
  if (!text) return text.error();
  return from_json(*text, name_or_path);
}

std::vector<std::string> TargetDesc::builtin_names() {
  std::vector<std::string> names;
  for (const auto& file : kEmbeddedTargets) {
    std::string_view n = file.name;
    names.emplace_back(n.substr(0, n.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace stowage
