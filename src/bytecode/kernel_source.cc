#include "stowage/bytecode/kernel_source.h"

#include <algorithm>
#include <map>
#include <set>

namespace stowage {
namespace {

bool is_horizontal_space(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }
bool is_newline(char c) { return c == '\n' || c == '\r'; }
bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
}

// The source's characters after translation phases 1 and 2: trigraphs replaced and
// backslash-newlines (a backslash, optional spaces, a newline, as Clang accepts
// them) removed, each with the offset of its first byte in the source.
class LogicalChars {
 public:
  explicit LogicalChars(std::string_view source) : source_(source) {}

  bool at_end() {
    skip_splices();
    return pos_ >= source_.size();
  }
  // The next logical character; '\0' at the end.
  char peek(size_t ahead = 0) const {
    LogicalChars copy = *this;
    for (size_t i = 0; i < ahead; ++i) copy.next();
    return copy.next();
  }
  char next() {
    skip_splices();
    if (pos_ >= source_.size()) return '\0';
    offset_ = pos_;
    size_t width = 1;
    char c = trigraph_at(pos_, width);
    pos_ += width;
    return c;
  }
  uint64_t offset() const { return offset_; }       // of the character next() returned last
  uint64_t position() {                              // of the character next() will return
    skip_splices();
    return pos_;
  }

 private:
  // The character at `at`, replacing a trigraph (`??=` is `#`); `width` is its bytes.
  char trigraph_at(size_t at, size_t& width) const {
    width = 1;
    if (source_[at] != '?' || at + 2 >= source_.size() || source_[at + 1] != '?') return source_[at];
    static constexpr std::string_view kFrom = "=/'()!<>-";
    static constexpr std::string_view kTo = "#\\^[]|{}~";
    size_t k = kFrom.find(source_[at + 2]);
    if (k == std::string_view::npos) return source_[at];
    width = 3;
    return kTo[k];
  }
  void skip_splices() {
    while (pos_ < source_.size()) {
      size_t width = 1;
      if (trigraph_at(pos_, width) != '\\') return;
      size_t at = pos_ + width;
      while (at < source_.size() && is_horizontal_space(source_[at])) ++at;
      if (at >= source_.size() || !is_newline(source_[at])) return;
      at += (source_[at] == '\r' && at + 1 < source_.size() && source_[at + 1] == '\n') ? 2 : 1;
      pos_ = at;
    }
  }

  std::string_view source_;
  size_t pos_ = 0;
  uint64_t offset_ = 0;
};

struct Macro {
  bool pastes = false;
  std::set<std::string> uses;  // identifiers of its replacement list
};

class Scanner {
 public:
  explicit Scanner(std::string_view source) : in_(source) {}

  std::vector<FileAccess> run() {
    while (!in_.at_end()) step();
    report_pasting_in_conditions();
    std::stable_sort(found_.begin(), found_.end(),
                     [](const FileAccess& a, const FileAccess& b) { return a.offset < b.offset; });
    return std::move(found_);
  }

 private:
  enum class Directive { kNone, kOther, kDefineName, kDefineBody, kCondition, kPragma };

  void step() {
    char c = in_.next();
    uint64_t at = in_.offset();
    if (is_newline(c)) {
      line_start_ = true;
      directive_ = Directive::kNone;
      return;
    }
    if (is_horizontal_space(c)) return;
    if (c == '/' && in_.peek() == '/') {
      while (!in_.at_end() && !is_newline(in_.peek())) in_.next();
      return;
    }
    if (c == '/' && in_.peek() == '*') {
      in_.next();
      // A comment is a space; one holding a newline lets a '#' after it begin a
      // directive, without ending the directive it is in.
      if (skip_block_comment(in_)) line_start_ = true;
      return;
    }
    bool hash = c == '#' || (c == '%' && in_.peek() == ':');
    if (hash) {
      if (c == '%') in_.next();
      bool paste = in_.peek() == '#' || (in_.peek() == '%' && in_.peek(1) == ':');
      if (paste && directive_ == Directive::kDefineBody) macros_[macro_].pastes = true;
      if (line_start_ && directive_ == Directive::kNone) {
        start_directive(at);
      } else if (line_start_) {
        // Inside a directive continued past a comment that held a newline: whether
        // the '#' starts a directive is unclear, so its name is checked as one.
        LogicalChars ahead = in_;
        if (std::string name = directive_name(ahead); is_file_directive(name)) add(at, "#" + name);
      }
      line_start_ = false;
      return;
    }
    line_start_ = false;
    if (c == '"' || c == '\'') {
      skip_literal(c);
      return;
    }
    if (is_identifier_char(c)) {
      std::string word(1, c);
      while (is_identifier_char(in_.peek())) word += in_.next();
      identifier(word, at);
    }
  }

  // Returns whether the comment held a newline.
  static bool skip_block_comment(LogicalChars& in) {
    bool newline = false;
    while (!in.at_end()) {
      char c = in.next();
      if (is_newline(c)) newline = true;
      if (c == '*' && in.peek() == '/') {
        in.next();
        break;
      }
    }
    return newline;
  }

  void skip_literal(char quote) {
    while (!in_.at_end()) {
      char c = in_.peek();
      if (is_newline(c)) return;  // unterminated: the line ends it
      in_.next();
      if (c == '\\') {
        if (!in_.at_end() && !is_newline(in_.peek())) in_.next();
      } else if (c == quote) {
        return;
      }
    }
  }

  static bool is_file_directive(const std::string& name) {
    return name == "include" || name == "include_next" || name == "import" || name == "embed";
  }

  // After a '#': spaces and comments, then the directive's name (read from `in`).
  static std::string directive_name(LogicalChars& in) {
    for (;;) {
      char c = in.peek();
      if (is_horizontal_space(c)) {
        in.next();
      } else if (c == '/' && in.peek(1) == '*') {
        in.next();
        in.next();
        skip_block_comment(in);
      } else {
        break;
      }
    }
    std::string name;
    while (is_identifier_char(in.peek())) name += in.next();
    return name;
  }

  void start_directive(uint64_t hash_at) {
    std::string name = directive_name(in_);
    directive_ = Directive::kOther;
    if (is_file_directive(name)) {
      add(hash_at, "#" + name);
    } else if (name == "if" || name == "elif") {
      directive_ = Directive::kCondition;
    } else if (name == "pragma") {
      directive_ = Directive::kPragma;
    } else if (name == "define") {
      directive_ = Directive::kDefineName;
    }
  }

  void identifier(const std::string& word, uint64_t at) {
    if (word.starts_with("__has_include") || word.starts_with("__has_embed")) {
      add(at, word);
    } else if (word == "_Pragma") {
      add(at, word);
    }
    switch (directive_) {
      case Directive::kPragma:
        if (word == "dependency") add(at, "#pragma dependency");
        break;
      case Directive::kCondition: conditions_.push_back({word, at}); break;
      case Directive::kDefineName:
        macro_ = word;
        macros_[macro_];  // a later definition adds to what an earlier one may do
        directive_ = Directive::kDefineBody;
        break;
      case Directive::kDefineBody: macros_[macro_].uses.insert(word); break;
      case Directive::kNone:
      case Directive::kOther: break;
    }
  }

  // Token pasting can spell __has_include out of harmless pieces; refuse pasting
  // macros (and macros that use them) in the lines where __has_include works.
  void report_pasting_in_conditions() {
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [name, macro] : macros_) {
        if (macro.pastes) continue;
        for (const std::string& used : macro.uses) {
          auto it = macros_.find(used);
          if (it != macros_.end() && it->second.pastes) {
            macro.pastes = true;
            changed = true;
            break;
          }
        }
      }
    }
    for (const auto& [word, at] : conditions_) {
      auto it = macros_.find(word);
      if (it != macros_.end() && it->second.pastes) add(at, "## in #if");
    }
  }

  void add(uint64_t at, std::string form) { found_.push_back({at, std::move(form)}); }

  LogicalChars in_;
  bool line_start_ = true;
  Directive directive_ = Directive::kNone;
  std::string macro_;
  std::map<std::string, Macro> macros_;
  std::vector<std::pair<std::string, uint64_t>> conditions_;
  std::vector<FileAccess> found_;
};

}  // namespace

std::vector<FileAccess> find_file_accesses(std::string_view source) { return Scanner(source).run(); }

}  // namespace stowage
