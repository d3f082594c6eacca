// The planning CSV format (the MiniMalloc benchmark format): a header line of
// column names, then one item a line. Fields are separated by commas, spaces
// and tabs around a field are ignored, empty lines are skipped, and there is
// no quoting, so ids cannot hold commas. MiniMalloc's other column names are
// read too: `buffer` for id, `start` or `begin` for lower, and `end`, the last
// moment alive (upper - 1).
#include <array>
#include <charconv>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "stowage/ir/packing.h"

namespace stowage::ir {
namespace {

enum Column { kId, kLower, kUpper, kSize, kAlignment, kOffset, kColumnCount };
constexpr std::array<std::string_view, kColumnCount> kColumnNames = {"id",   "lower",     "upper",
                                                                     "size", "alignment", "offset"};

struct ColumnName {
  std::string_view name;
  Column column;
};
constexpr ColumnName kAliases[] = {{"buffer", kId}, {"start", kLower}, {"begin", kLower}, {"end", kUpper}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    const size_t comma = line.find(',');
    fields.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return fields;
    line.remove_prefix(comma + 1);
  }
}

class Reader {
 public:
  Reader(std::string_view text, std::string_view origin) : text_(text), origin_(origin) {}

  Expected<PlanningSolution> read(bool want_offsets) {
    std::optional<std::string_view> header = next_line();
    if (!header) return fail("missing header (expected columns id,lower,upper,size)");
    STOWAGE_TRY(read_header(*header));
    for (Column required : {kId, kLower, kUpper, kSize})
      if (position_[required] < 0) return fail("missing column '" + std::string(kColumnNames[required]) + "'");
    if (want_offsets && position_[kOffset] < 0) return fail("missing column 'offset'");
    PlanningSolution result;
    std::unordered_map<std::string, uint32_t> line_of_id;
    while (std::optional<std::string_view> line = next_line()) {
      const std::vector<std::string_view> fields = split_fields(*line);
      if (fields.size() != column_count_)
        return fail("expected " + std::to_string(column_count_) + " fields, found " + std::to_string(fields.size()));
      PackItem item;
      item.id = std::string(fields[position_[kId]]);
      if (item.id.empty()) return fail("column '" + std::string(names_[kId]) + "': empty");
      auto [it, fresh] = line_of_id.emplace(item.id, line_number_);
      if (!fresh)
        return fail("column '" + std::string(names_[kId]) + "': '" + item.id + "' already appears on line " +
                    std::to_string(it->second));
      STOWAGE_TRY(read_signed(fields, kLower, item.lower));
      STOWAGE_TRY(read_signed(fields, kUpper, item.upper));
      if (upper_is_last_moment_) {
        if (item.upper == std::numeric_limits<int64_t>::max())
          return fail("column '" + std::string(names_[kUpper]) + "': '" + std::string(fields[position_[kUpper]]) +
                      "' is out of range");
        ++item.upper;
      }
      STOWAGE_TRY(read_unsigned(fields, kSize, item.size));
      if (position_[kAlignment] >= 0) {
        STOWAGE_TRY(read_unsigned(fields, kAlignment, item.alignment));
        if (item.alignment == 0) return fail("column 'alignment': must be at least 1");
      }
      if (want_offsets) {
        uint64_t offset = 0;
        STOWAGE_TRY(read_unsigned(fields, kOffset, offset));
        result.offsets.push_back(offset);
      }
      result.items.push_back(std::move(item));
    }
    return result;
  }

 private:
  // The next non-empty line, counting lines as it goes.
  std::optional<std::string_view> next_line() {
    while (rest_begin_ < text_.size()) {
      const size_t end = std::min(text_.find('\n', rest_begin_), text_.size());
      std::string_view line = text_.substr(rest_begin_, end - rest_begin_);
      rest_begin_ = end + 1;
      ++line_number_;
      if (!trim(line).empty()) return line;
    }
    return std::nullopt;
  }

  Status read_header(std::string_view line) {
    const std::vector<std::string_view> names = split_fields(line);
    column_count_ = names.size();
    for (size_t p = 0; p < names.size(); ++p) {
      int column = -1;
      for (int c = 0; c < kColumnCount; ++c)
        if (names[p] == kColumnNames[c]) column = c;
      for (const ColumnName& alias : kAliases)
        if (names[p] == alias.name) column = alias.column;
      if (column < 0)
        return fail("unknown column '" + std::string(names[p]) +
                    "' (expected id, lower, upper, size, alignment, offset)");
      if (position_[column] >= 0) {
        if (names_[column] == names[p]) return fail("column '" + std::string(names[p]) + "' appears twice");
        return fail("columns '" + std::string(names_[column]) + "' and '" + std::string(names[p]) +
                    "' say the same");
      }
      position_[column] = static_cast<int>(p);
      names_[column] = names[p];
      if (names[p] == "end") upper_is_last_moment_ = true;
    }
    return Status::ok();
  }

  template <typename T>
  Status read_number(const std::vector<std::string_view>& fields, Column column, T& value, const char* what) {
    const std::string_view field = fields[position_[column]];
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
    const std::string prefix = "column '" + std::string(names_[column]) + "': '" + std::string(field) + "' ";
    if (error == std::errc::result_out_of_range) return fail(prefix + "is out of range");
    if (error != std::errc() || end != field.data() + field.size() || field.empty())
      return fail(prefix + "is not " + what);
    return Status::ok();
  }
  Status read_signed(const std::vector<std::string_view>& fields, Column column, int64_t& value) {
    return read_number(fields, column, value, "an integer");
  }
  Status read_unsigned(const std::vector<std::string_view>& fields, Column column, uint64_t& value) {
    if (!fields[position_[column]].empty() && fields[position_[column]].front() == '-')
      return fail("column '" + std::string(names_[column]) + "': '" + std::string(fields[position_[column]]) +
                  "' is negative");
    return read_number(fields, column, value, "a non-negative integer");
  }

  Error fail(const std::string& message) const {
    return Error(ErrorKind::kInvalidInput,
                 std::string(origin_) + ":" + std::to_string(std::max<uint32_t>(line_number_, 1)) + ": " + message);
  }

  std::string_view text_, origin_;
  size_t rest_begin_ = 0;
  uint32_t line_number_ = 0;
  std::array<int, kColumnCount> position_ = {-1, -1, -1, -1, -1, -1};
  std::array<std::string_view, kColumnCount> names_ = kColumnNames;  // as the header spells them
  bool upper_is_last_moment_ = false;  // an `end` column: upper is one past it
  size_t column_count_ = 0;
};

}  // namespace

Expected<std::vector<PackItem>> read_planning_csv(std::string_view text, std::string_view origin) {
  Expected<PlanningSolution> result = Reader(text, origin).read(/*want_offsets=*/false);
  if (!result) return result.error();
  return std::move(result->items);
}

Expected<PlanningSolution> read_planning_solution_csv(std::string_view text, std::string_view origin) {
  return Reader(text, origin).read(/*want_offsets=*/true);
}

std::string write_planning_csv(std::span<const PackItem> items, std::span<const uint64_t> offsets) {
  bool aligned = false;
  for (const PackItem& item : items) aligned = aligned || item.alignment != 1;
  const bool with_offsets = !offsets.empty() && offsets.size() == items.size();
  std::string out = "id,lower,upper,size";
  if (aligned) out += ",alignment";
  if (with_offsets) out += ",offset";
  out += '\n';
  for (size_t i = 0; i < items.size(); ++i) {
    const PackItem& item = items[i];
    out += item.id + ',' + std::to_string(item.lower) + ',' + std::to_string(item.upper) + ',' +
           std::to_string(item.size);
    if (aligned) out += ',' + std::to_string(item.alignment);
    if (with_offsets) out += ',' + std::to_string(offsets[i]);
    out += '\n';
  }
  return out;
}

}  // namespace stowage::ir
