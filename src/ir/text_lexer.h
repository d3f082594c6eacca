// Tokens of the IR text form (docs/ir.md). Internal to the parser.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "stowage/ir/ir.h"

namespace stowage::ir::text {

enum class TokenKind : uint8_t {
  kIdent,
  kInt,
  kFloat,
  kString,
  kTripleQuote,
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kComma,
  kColon,
  kEquals,
  kArrow,
  kMinus,
  kNewline,
  kEof,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string_view text;  // as written in the input
  std::string string_value;  // kString: the unescaped contents
  int64_t int_value = 0;
  double float_value = 0.0;
  SourceLoc loc;
};

// A syntax error; the parser turns it into one Error value at its boundary.
struct SyntaxError {
  SourceLoc loc;
  std::string message;
};

// How error messages show what was found: `'x'`, `end of line`, `end of input`.
std::string describe(const Token& token);
// Printable form of raw input bytes in a message: `'a'`, `'\x00'`.
std::string quote_bytes(std::string_view bytes);

// Splits the text into tokens on demand. Newlines are tokens, except inside
// parentheses and brackets, so long lists may span lines. Throws SyntaxError.
class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Token next();
  // Reads the raw kernel source after a `"""` token: a newline, then everything up to
  // the closing `"""` (the last three quotes of a run, so a source may end in a quote).
  // `open` is where the opening quotes were, for the error message.
  std::string read_kernel_source(SourceLoc open, SourceLoc* source_start);

 private:
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool at_end(size_t ahead = 0) const { return pos_ + ahead >= text_.size(); }
  void advance(size_t count = 1);
  SourceLoc loc() const { return {line_, col_}; }
  void skip_blanks_and_comments();
  Token lex_number(SourceLoc start);
  Token lex_string(SourceLoc start);
  Token make(TokenKind kind, size_t begin, SourceLoc start) const;

  std::string_view text_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  uint32_t col_ = 1;
  int64_t nesting_ = 0;  // open ( and [ : newlines inside are not tokens
};

}  // namespace stowage::ir::text
