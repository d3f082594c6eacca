#include "text_lexer.h"

#include <fmt/format.h>

#include <charconv>

namespace stowage::ir::text {
namespace {

constexpr size_t kMaxQuotedToken = 40;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c) || c == '.'; }

[[noreturn]] void fail(SourceLoc loc, std::string message) { throw SyntaxError{loc, std::move(message)}; }

// -?[0-9]+ ; returns the index after the digits, or npos if there are none.
size_t scan_digits(std::string_view s, size_t i) {
  size_t begin = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  return i == begin ? std::string_view::npos : i;
}

enum class NumberForm { kInt, kFloat, kMalformed };

// INT = -?D+ ; FLOAT = -?D+ ('.' D*)? ([eE] [+-]? D+)? with a '.' or an exponent.
NumberForm classify_number(std::string_view s) {
  size_t i = s[0] == '-' ? 1 : 0;
  i = scan_digits(s, i);
  if (i == std::string_view::npos) return NumberForm::kMalformed;
  bool is_float = false;
  if (i < s.size() && s[i] == '.') {
    is_float = true;
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    is_float = true;
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    i = scan_digits(s, i);
    if (i == std::string_view::npos) return NumberForm::kMalformed;
  }
  if (i != s.size()) return NumberForm::kMalformed;
  return is_float ? NumberForm::kFloat : NumberForm::kInt;
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string quote_bytes(std::string_view bytes) {
  bool truncated = bytes.size() > kMaxQuotedToken;
  if (truncated) bytes = bytes.substr(0, kMaxQuotedToken - 3);
  std::string out = "'";
  for (unsigned char c : bytes) {
    if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (truncated) out += "...";
  return out + "'";
}

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kNewline: return "end of line";
    case TokenKind::kEof: return "end of input";
    default: return quote_bytes(token.text);
  }
}

void Lexer::advance(size_t count) {
  for (size_t i = 0; i < count && pos_ < text_.size(); ++i) {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
}

void Lexer::skip_blanks_and_comments() {
  while (!at_end()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || (c == '\n' && nesting_ > 0)) {
      advance();
    } else if (c == '#') {
      while (!at_end() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

Token Lexer::make(TokenKind kind, size_t begin, SourceLoc start) const {
  Token t;
  t.kind = kind;
  t.text = text_.substr(begin, pos_ - begin);
  t.loc = start;
  return t;
}

Token Lexer::next() {
  skip_blanks_and_comments();
  SourceLoc start = loc();
  size_t begin = pos_;
  if (at_end()) return make(TokenKind::kEof, begin, start);
  char c = peek();
  if (is_digit(c) || (c == '-' && is_digit(peek(1)))) return lex_number(start);
  if (is_ident_start(c)) {
    while (!at_end() && is_ident_char(peek())) advance();
    return make(TokenKind::kIdent, begin, start);
  }
  if (c == '"') {
    if (peek(1) == '"' && peek(2) == '"') {
      advance(3);
      return make(TokenKind::kTripleQuote, begin, start);
    }
    return lex_string(start);
  }
  if (c == '-' && peek(1) == '>') {
    advance(2);
    return make(TokenKind::kArrow, begin, start);
  }
  TokenKind kind;
  switch (c) {
    case '\n': kind = TokenKind::kNewline; break;
    case '(': kind = TokenKind::kLParen; ++nesting_; break;
    case '[': kind = TokenKind::kLBracket; ++nesting_; break;
    case ')': kind = TokenKind::kRParen; break;
    case ']': kind = TokenKind::kRBracket; break;
    case '{': kind = TokenKind::kLBrace; break;
    case '}': kind = TokenKind::kRBrace; break;
    case ',': kind = TokenKind::kComma; break;
    case ':': kind = TokenKind::kColon; break;
    case '=': kind = TokenKind::kEquals; break;
    case '-': kind = TokenKind::kMinus; break;
    default: fail(start, fmt::format("unexpected character {}", quote_bytes(text_.substr(pos_, 1))));
  }
  if ((kind == TokenKind::kRParen || kind == TokenKind::kRBracket) && nesting_ > 0) --nesting_;
  advance();
  return make(kind, begin, start);
}

Token Lexer::lex_number(SourceLoc start) {
  size_t begin = pos_;
  advance();  // a digit or the sign
  while (!at_end()) {
    char c = peek();
    char prev = text_[pos_ - 1];
    bool exponent_sign = (c == '+' || c == '-') && (prev == 'e' || prev == 'E');
    if (!is_ident_char(c) && !exponent_sign) break;
    advance();
  }
  std::string_view text = text_.substr(begin, pos_ - begin);
  NumberForm form = classify_number(text);
  if (form == NumberForm::kMalformed) fail(start, fmt::format("malformed number {}", quote_bytes(text)));
  Token t = make(form == NumberForm::kInt ? TokenKind::kInt : TokenKind::kFloat, begin, start);
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (form == NumberForm::kInt) {
    auto [ptr, ec] = std::from_chars(first, last, t.int_value);
    if (ec != std::errc() || ptr != last) fail(start, fmt::format("integer {} does not fit in 64 bits", quote_bytes(text)));
  } else {
    auto [ptr, ec] = std::from_chars(first, last, t.float_value);
    if (ec != std::errc() || ptr != last) fail(start, fmt::format("float {} is out of range", quote_bytes(text)));
  }
  return t;
}

Token Lexer::lex_string(SourceLoc start) {
  size_t begin = pos_;
  advance();  // the opening quote
  std::string value;
  while (true) {
    if (at_end() || peek() == '\n') fail(start, "unterminated string");
    char c = peek();
    if (c == '"') break;
    if (c != '\\') {
      value += c;
      advance();
      continue;
    }
    SourceLoc escape_loc = loc();
    char e = peek(1);
    if (e == '\\' || e == '"') {
      value += e;
      advance(2);
    } else if (e == 'n') {
      value += '\n';
      advance(2);
    } else if (e == 't') {
      value += '\t';
      advance(2);
    } else if (e == 'x' && hex_value(peek(2)) >= 0 && hex_value(peek(3)) >= 0) {
      value += static_cast<char>(hex_value(peek(2)) * 16 + hex_value(peek(3)));
      advance(4);
    } else {
      fail(escape_loc, fmt::format("unknown escape {} in string", quote_bytes(text_.substr(pos_, 2))));
    }
  }
  advance();  // the closing quote
  Token t = make(TokenKind::kString, begin, start);
  t.string_value = std::move(value);
  return t;
}

std::string Lexer::read_kernel_source(SourceLoc open, SourceLoc* source_start) {
  if (peek() == '\r' && peek(1) == '\n') advance();
  if (peek() != '\n') {
    fail(loc(), "kernel source must start on the line after '\"\"\"'");
  }
  advance();
  *source_start = loc();
  size_t close = text_.find("\"\"\"", pos_);
  if (close == std::string_view::npos) fail(open, "unterminated kernel source: no closing '\"\"\"'");
  // A run of more than three quotes closes with its last three.
  while (close + 3 < text_.size() && text_[close + 3] == '"') ++close;
  std::string source(text_.substr(pos_, close - pos_));
  advance(close + 3 - pos_);
  return source;
}

}  // namespace stowage::ir::text
