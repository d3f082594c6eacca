// The text of a file of the source tree, for the end-to-end tests.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace stowage::testing {

inline std::string read_source_file(const std::string& relative) {
  std::ifstream in(std::string(STOWAGE_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace stowage::testing
