#include "stowage/ir/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "constant_text.h"
#include "stowage/ir/printer.h"
#include "stowage/ir/verifier.h"
#include "text_lexer.h"

namespace stowage::ir {
namespace {

using text::Lexer;
using text::SyntaxError;
using text::Token;
using text::TokenKind;

// Tuple types nest; the limit keeps hostile input from exhausting the stack.
constexpr int kMaxTypeDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view input) : lexer_(input) { advance(); }

  Module parse_module() {
    Module module;
    while (true) {
      skip_newlines();
      if (at(TokenKind::kEof)) return module;
      if (at_word("kernels")) {
        module.units.push_back(parse_unit());
      } else if (at_word("const")) {
        module.constants.push_back(parse_constant());
      } else if (at_word("fn")) {
        module.functions.push_back(parse_function());
      } else {
        fail_expected("'fn', 'const' or 'kernels'");
      }
    }
  }

 private:
  // --- Tokens ---------------------------------------------------------------

  void advance() { tok_ = lexer_.next(); }
  bool at(TokenKind kind) const { return tok_.kind == kind; }
  bool at_word(std::string_view word) const { return at(TokenKind::kIdent) && tok_.text == word; }

  [[noreturn]] static void fail(SourceLoc loc, std::string message) { throw SyntaxError{loc, std::move(message)}; }
  [[noreturn]] void fail_expected(std::string_view expected) const {
    fail(tok_.loc, fmt::format("expected {}, found {}", expected, text::describe(tok_)));
  }

  Token expect(TokenKind kind, std::string_view expected) {
    if (!at(kind)) fail_expected(expected);
    Token t = tok_;
    advance();
    return t;
  }
  Token expect_ident(std::string_view expected) { return expect(TokenKind::kIdent, expected); }

  void skip_newlines() {
    while (at(TokenKind::kNewline)) advance();
  }
  void expect_end_of_line(std::string_view after) {
    if (at(TokenKind::kEof)) return;
    expect(TokenKind::kNewline, fmt::format("end of line after {}", after));
  }

  // `return`, `inf` and `nan` cannot name variables: arguments would misread them.
  static void check_not_reserved(const Token& name) {
    if (!is_valid_variable_name(name.text)) {
      fail(name.loc, fmt::format("'{}' is a reserved word and cannot name a variable", name.text));
    }
  }

  // A name that a variable is given (a parameter or a binding's result).
  std::string expect_new_variable(std::string_view expected) {
    Token t = expect_ident(expected);
    check_not_reserved(t);
    return std::string(t.text);
  }

  // --- Top level ------------------------------------------------------------

  KernelSourceUnit parse_unit() {
    advance();  // kernels
    KernelSourceUnit unit;
    unit.name = std::string(expect_ident("a name after 'kernels'").text);
    if (!at(TokenKind::kTripleQuote)) fail_expected("'\"\"\"' after the kernel unit's name");
    // The lexer stands just past the opening quotes: read the raw source from there.
    SourceLoc source_start;
    unit.source = lexer_.read_kernel_source(tok_.loc, &source_start);
    unit.loc = {source_start.line, 1};
    advance();
    expect_end_of_line("the kernel source's closing '\"\"\"'");
    return unit;
  }

  // const NAME: TYPE = DATA [, scope="S"], DATA a list of numbers, base64 "...", or external.
  ConstantTensor parse_constant() {
    ConstantTensor c;
    c.loc = tok_.loc;
    advance();  // const
    c.name = expect_new_variable("a constant name after 'const'");
    expect(TokenKind::kColon, "':' after the constant's name");
    SourceLoc type_loc = tok_.loc;
    c.type = parse_type(0);
    if (c.type.kind != Type::Kind::kTensor) fail(type_loc, fmt::format("constant '{}' must have a Tensor type", c.name));
    auto nbytes = checked_nbytes(c.type.shape, c.type.dtype);
    if (!nbytes) fail(type_loc, fmt::format("constant '{}': its type's size is negative or overflows", c.name));
    expect(TokenKind::kEquals, "'=' and the constant's data");
    SourceLoc data_loc = tok_.loc;
    if (at(TokenKind::kLBracket)) {
      c.data = parse_constant_numbers(c, data_loc);
    } else if (at_word("base64")) {
      advance();
      Token text = expect(TokenKind::kString, "a quoted base64 string after 'base64'");
      auto bytes = text::base64_decode(text.string_value);
      if (!bytes) fail(text.loc, fmt::format("constant '{}': the data is not valid base64", c.name));
      if (bytes->size() != *nbytes) {
        fail(text.loc, fmt::format("constant '{}': the data holds {} bytes, its type {} needs {}", c.name,
                                   bytes->size(), print_type(c.type), *nbytes));
      }
      c.data = std::make_shared<const std::vector<std::byte>>(std::move(*bytes));
    } else if (at_word("external")) {
      advance();  // the data comes beside the text: c.data stays null
    } else {
      fail_expected("a list of numbers, base64 \"...\" or external as the constant's data");
    }
    if (at(TokenKind::kComma)) {
      advance();
      Token key = expect_ident("'scope' after the constant's data");
      if (key.text != "scope") fail(key.loc, fmt::format("unknown keyword argument {} of const (it takes scope)",
                                                        text::quote_bytes(key.text)));
      expect(TokenKind::kEquals, "'=' after 'scope'");
      c.scope = expect(TokenKind::kString, "a quoted scope name").string_value;
    }
    expect_end_of_line("the constant");
    return c;
  }

  std::shared_ptr<const std::vector<std::byte>> parse_constant_numbers(const ConstantTensor& c, SourceLoc list_loc) {
    advance();  // [
    std::vector<text::ConstantNumber> numbers;
    while (!at(TokenKind::kRBracket)) {
      text::ConstantNumber n;
      if (at(TokenKind::kInt)) {
        n.int_value = tok_.int_value;
      } else if (at(TokenKind::kFloat)) {
        n = {true, 0, tok_.float_value};
      } else if (at_word("inf")) {
        n = {true, 0, std::numeric_limits<double>::infinity()};
      } else if (at_word("nan")) {
        n = {true, 0, std::numeric_limits<double>::quiet_NaN()};
      } else if (at(TokenKind::kMinus)) {
        advance();
        if (!at_word("inf")) fail_expected("'inf' or a digit after '-'");
        n = {true, 0, -std::numeric_limits<double>::infinity()};
      } else {
        fail_expected("a number or ']' in the constant's data");
      }
      advance();
      numbers.push_back(n);
      if (at(TokenKind::kRBracket)) break;
      expect(TokenKind::kComma, "',' or ']' in the constant's data");
    }
    advance();  // ]
    auto count = checked_num_elements(c.type.shape);
    if (numbers.size() != *count) {
      fail(list_loc, fmt::format("constant '{}' lists {} numbers, its type {} has {} elements", c.name,
                                 numbers.size(), print_type(c.type), *count));
    }
    Expected<std::vector<std::byte>> bytes = text::numbers_to_bytes(c.type.dtype, numbers);
    if (!bytes) fail(list_loc, fmt::format("constant '{}': {}", c.name, bytes.error().message()));
    return std::make_shared<const std::vector<std::byte>>(bytes.take());
  }

  Function parse_function() {
    Function fn;
    fn.loc = tok_.loc;
    advance();  // fn
    fn.name = std::string(expect_ident("a function name after 'fn'").text);
    expect(TokenKind::kLParen, "'(' after the function name");
    if (!at(TokenKind::kRParen)) {
      while (true) {
        Param p;
        p.loc = tok_.loc;
        p.name = expect_new_variable("a parameter name");
        expect(TokenKind::kColon, "':' after the parameter name");
        p.type = parse_type(0);
        fn.params.push_back(std::move(p));
        if (at(TokenKind::kRParen)) break;
        expect(TokenKind::kComma, "',' or ')' in the parameter list");
      }
    }
    advance();  // )
    expect(TokenKind::kArrow, "'->' and the return type after the parameters");
    fn.ret_type = parse_type(0);
    expect(TokenKind::kLBrace, "'{' after the return type");
    expect_end_of_line("'{'");
    parse_body(fn);
    return fn;
  }

  void parse_body(Function& fn) {
    while (true) {
      skip_newlines();
      if (at(TokenKind::kEof)) fail(tok_.loc, fmt::format("function '{}' ends without 'return' and '}}'", fn.name));
      if (at(TokenKind::kRBrace)) fail(tok_.loc, fmt::format("function '{}' ends without 'return'", fn.name));
      if (at_word("return")) break;
      fn.bindings.push_back(parse_binding());
    }
    fn.ret_loc = tok_.loc;
    advance();  // return
    if (at(TokenKind::kLParen)) {
      parse_returned_tuple(fn);
      expect_end_of_line("the returned tuple");
    } else {
      fn.returns = {std::string(expect_ident("a variable name or '(' after 'return'").text)};
      expect_end_of_line("the returned variable");
    }
    skip_newlines();
    expect(TokenKind::kRBrace, "'}' after the return");
    expect_end_of_line("'}'");
  }

  // `(a, b)`, or `(a,)` for a tuple of one; as in Python, `(a)` is no tuple, so it
  // is refused rather than read as one.
  void parse_returned_tuple(Function& fn) {
    SourceLoc open = tok_.loc;
    advance();  // (
    fn.returns_tuple = true;
    bool trailing_comma = false;
    while (true) {
      fn.returns.emplace_back(expect_ident("a variable name in the returned tuple").text);
      trailing_comma = false;
      if (at(TokenKind::kRParen)) break;
      expect(TokenKind::kComma, "',' or ')' in the returned tuple");
      trailing_comma = true;
      if (at(TokenKind::kRParen)) break;
    }
    advance();  // )
    if (fn.returns.size() == 1 && !trailing_comma) {
      fail(open, fmt::format("'({})' is not a tuple: write 'return ({},)' for a tuple of one, or 'return {}'",
                             fn.returns[0], fn.returns[0], fn.returns[0]));
    }
  }

  // --- Types ----------------------------------------------------------------

  Type parse_type(int depth) {
    if (depth >= kMaxTypeDepth) fail(tok_.loc, fmt::format("types nest deeper than {} levels", kMaxTypeDepth));
    Token name = expect_ident("a type");
    if (name.text == "Tensor") return parse_tensor_type();
    if (name.text == "Tuple") return parse_tuple_type(depth);
    static constexpr std::array<std::pair<std::string_view, Type::Kind>, 6> kSimple = {{
        {"Storage", Type::Kind::kStorage},
        {"Shape", Type::Kind::kShape},
        {"int", Type::Kind::kInt},
        {"float", Type::Kind::kFloat},
        {"bool", Type::Kind::kBool},
        {"Object", Type::Kind::kObject},
    }};
    for (const auto& [word, kind] : kSimple) {
      if (name.text == word) return Type::of(kind);
    }
    fail(name.loc, fmt::format("unknown type {}", text::quote_bytes(name.text)));
  }

  // Tensor[(4, 64), int32]; a rank-1 shape is written (8,), but (8) is read too.
  Type parse_tensor_type() {
    expect(TokenKind::kLBracket, "'[' after 'Tensor'");
    expect(TokenKind::kLParen, "'(' and the shape in the tensor type");
    std::vector<int64_t> shape;
    while (!at(TokenKind::kRParen)) {
      shape.push_back(expect_int("an integer or ')' in the tensor shape"));
      if (at(TokenKind::kRParen)) break;
      expect(TokenKind::kComma, "',' or ')' in the tensor shape");
    }
    advance();  // )
    expect(TokenKind::kComma, "',' and the dtype after the tensor shape");
    DType dtype = parse_dtype_word();
    expect(TokenKind::kRBracket, "']' after the tensor dtype");
    return Type::tensor(std::move(shape), dtype);
  }

  Type parse_tuple_type(int depth) {
    expect(TokenKind::kLBracket, "'[' after 'Tuple'");
    Type tuple = Type::of(Type::Kind::kTuple);
    if (at(TokenKind::kRBracket)) {
      advance();
      return tuple;
    }
    while (true) {
      tuple.fields.push_back(parse_type(depth + 1));
      if (at(TokenKind::kRBracket)) break;
      expect(TokenKind::kComma, "',' or ']' in the tuple type");
    }
    advance();  // ]
    return tuple;
  }

  // --- Operands -------------------------------------------------------------

  int64_t expect_int(std::string_view expected) { return expect(TokenKind::kInt, expected).int_value; }

  DType parse_dtype_word() {
    Token t = expect_ident("a dtype");
    std::optional<DType> dtype = parse_dtype(t.text);
    if (!dtype) fail(t.loc, fmt::format("unknown dtype {}", text::quote_bytes(t.text)));
    return *dtype;
  }

  // [4, 64]; `what` names the list in messages ("shape", "grid").
  std::vector<int64_t> parse_int_list(std::string_view what) {
    expect(TokenKind::kLBracket, fmt::format("'[' to open the {}", what));
    std::vector<int64_t> values;
    if (at(TokenKind::kRBracket)) {
      advance();
      return values;
    }
    while (true) {
      values.push_back(expect_int(fmt::format("an integer in {}", what)));
      if (at(TokenKind::kRBracket)) break;
      expect(TokenKind::kComma, fmt::format("',' or ']' in {}", what));
    }
    advance();  // ]
    return values;
  }

  Arg parse_arg() {
    Arg arg;
    SourceLoc loc = tok_.loc;
    if (at(TokenKind::kInt)) {
      arg = Arg::integer(tok_.int_value);
    } else if (at(TokenKind::kFloat)) {
      arg = Arg::floating(tok_.float_value);
    } else if (at_word("inf")) {
      arg = Arg::floating(std::numeric_limits<double>::infinity());
    } else if (at_word("nan")) {
      arg = Arg::floating(std::numeric_limits<double>::quiet_NaN());
    } else if (at_word("null")) {
      arg = Arg::null();
    } else if (at(TokenKind::kMinus)) {
      advance();
      if (!at_word("inf")) fail_expected("'inf' or a digit after '-'");
      arg = Arg::floating(-std::numeric_limits<double>::infinity());
    } else if (at(TokenKind::kIdent)) {
      arg = Arg::variable(std::string(tok_.text));
    } else {
      fail_expected("a variable, a literal or null in the argument list");
    }
    advance();
    arg.loc = loc;
    return arg;
  }

  std::vector<Arg> parse_arg_list() {
    expect(TokenKind::kLBracket, "'[' to open the argument list");
    std::vector<Arg> args;
    if (at(TokenKind::kRBracket)) {
      advance();
      return args;
    }
    while (true) {
      args.push_back(parse_arg());
      if (at(TokenKind::kRBracket)) break;
      expect(TokenKind::kComma, "',' or ']' in the argument list");
    }
    advance();  // ]
    return args;
  }

  void parse_var_operand(Binding& b) {
    b.var_locs.push_back(tok_.loc);
    b.vars.emplace_back(expect_ident(fmt::format("a variable in {}", op_name(b.op))).text);
  }
  void expect_operand_comma(const Binding& b) {
    expect(TokenKind::kComma, fmt::format("',' between the operands of {}", op_name(b.op)));
  }

  // `, key=value` pairs after the positional operands, for the keyword operands of the op.
  void parse_keywords(Binding& b, const std::vector<Operand>& keywords) {
    std::vector<std::string_view> allowed;
    for (Operand k : keywords) allowed.push_back(keyword_name(k));
    std::vector<std::string_view> seen;
    while (at(TokenKind::kComma)) {
      advance();
      Token key = expect_ident(fmt::format("a keyword argument of {}", op_name(b.op)));
      auto found = std::find(allowed.begin(), allowed.end(), key.text);
      if (found == allowed.end()) {
        fail(key.loc, fmt::format("unknown keyword argument {} of {} (it takes {})", text::quote_bytes(key.text),
                                  op_name(b.op), fmt::join(allowed, ", ")));
      }
      if (std::find(seen.begin(), seen.end(), key.text) != seen.end()) {
        fail(key.loc, fmt::format("duplicate keyword argument '{}'", key.text));
      }
      seen.push_back(key.text);
      expect(TokenKind::kEquals, fmt::format("'=' after '{}'", key.text));
      parse_keyword_value(b, keywords[static_cast<size_t>(found - allowed.begin())]);
    }
    for (Operand k : keywords) {
      bool required = k == Operand::kDeviceKw || k == Operand::kDTypeKw || k == Operand::kScopeKw ||
                      k == Operand::kGridKw;
      if (required && std::find(seen.begin(), seen.end(), keyword_name(k)) == seen.end()) {
        fail(tok_.loc, fmt::format("{} needs the keyword argument '{}'", op_name(b.op), keyword_name(k)));
      }
    }
  }

  void parse_keyword_value(Binding& b, Operand keyword) {
    switch (keyword) {
      case Operand::kDeviceKw: b.device = expect_int("an integer device index"); return;
      case Operand::kDTypeKw: b.dtype = parse_dtype_word(); return;
      case Operand::kScopeKw:
      case Operand::kScopeOptKw: b.scope = expect(TokenKind::kString, "a quoted scope name").string_value; return;
      case Operand::kTableScopeKw:
        b.table_scope = expect(TokenKind::kString, "a quoted scope name").string_value;
        return;
      case Operand::kGridKw: b.grid = parse_int_list("grid"); return;
      case Operand::kLocalKw: b.local = parse_int_list("local size"); return;
      default: return;
    }
  }

  // A tensor's top-left pixel in an image storage: [row, column], like image sizes.
  void parse_image_offset(Binding& b) {
    SourceLoc loc = tok_.loc;
    std::vector<int64_t> at = parse_int_list("image offset");
    if (at.size() != 2) {
      fail(loc, fmt::format("an image offset is [y, x] (row, column), got {} value{}", at.size(),
                            at.size() == 1 ? "" : "s"));
    }
    if (at[0] < 0 || at[1] < 0) fail(loc, fmt::format("image offset [{}, {}] is negative", at[0], at[1]));
    b.image_offset = ImageOffset{static_cast<uint64_t>(at[1]), static_cast<uint64_t>(at[0])};
  }

  void parse_positional(Binding& b, Operand operand) {
    switch (operand) {
      case Operand::kVar: parse_var_operand(b); return;
      case Operand::kOffset:
        if (b.op == Op::kAllocTensor && at(TokenKind::kLBracket)) {
          parse_image_offset(b);
          return;
        }
        b.offset = expect_int(b.op == Op::kAllocTensor ? "an integer offset or an image offset [y, x]"
                                                        : "an integer offset");
        return;
      case Operand::kSize: b.shape = parse_int_list("storage size"); return;
      case Operand::kShape: b.shape = parse_int_list("shape"); return;
      case Operand::kDType: b.dtype = parse_dtype_word(); return;
      case Operand::kKernel: b.callee = std::string(expect_ident("a kernel name").text); return;
      case Operand::kFunction: b.callee = std::string(expect_ident("a function name").text); return;
      case Operand::kArgs: b.args = parse_arg_list(); return;
      case Operand::kTableOffsets:
        // Rank 2 has one table, written as an integer; rank N a list, breadth-first.
        if (at(TokenKind::kLBracket)) {
          b.table_offsets = parse_int_list("table offsets");
        } else {
          b.table_offsets = {expect_int("an integer table offset or a list of them")};
        }
        return;
      case Operand::kDataOffsets: b.data_offsets = parse_int_list("data offsets"); return;
      default: return;
    }
  }

  // The operands in the order of the op's row in op_table.h.
  void parse_operands(Binding& b) {
    std::vector<Operand> keywords;
    bool first = true;
    for (Operand operand : op_info(b.op).operand_list()) {
      if (is_keyword(operand)) {
        keywords.push_back(operand);
        if (operand == Operand::kScopeOptKw) b.scope = "global";
        if (operand == Operand::kTableScopeKw) b.table_scope = "global";
        continue;
      }
      if (!first) expect_operand_comma(b);
      first = false;
      parse_positional(b, operand);
    }
    if (!keywords.empty()) parse_keywords(b, keywords);
  }

  Binding parse_binding() {
    Binding b;
    b.loc = tok_.loc;
    Token first = expect_ident("a binding or 'return'");
    Token op_word = first;
    if (at(TokenKind::kEquals)) {
      check_not_reserved(first);
      b.result = std::string(first.text);
      advance();
      op_word = expect_ident("an op after '='");
    }
    std::optional<Op> op = parse_op(op_word.text);
    if (!op) fail(op_word.loc, fmt::format("unknown op {}", text::quote_bytes(op_word.text)));
    b.op = *op;
    expect(TokenKind::kLParen, fmt::format("'(' after '{}'", op_word.text));
    parse_operands(b);
    expect(TokenKind::kRParen, fmt::format("')' after the operands of {}", op_name(b.op)));
    if (op_produces_value(b.op) && b.result.empty()) {
      fail(b.loc, fmt::format("{} produces a value: bind it, as in 'x = {}(...)'", op_name(b.op), op_name(b.op)));
    }
    if (!op_produces_value(b.op) && !b.result.empty()) {
      fail(b.loc, fmt::format("{} produces no value to bind to '{}'", op_name(b.op), b.result));
    }
    expect_end_of_line("the binding");
    return b;
  }

  Lexer lexer_;
  Token tok_;
};

}  // namespace

Expected<Module> parse_module(std::string_view input, std::string_view file_name) {
  try {
    return Parser(input).parse_module();
  } catch (const SyntaxError& e) {
    return Error(ErrorKind::kInvalidInput,
                 fmt::format("{}:{}:{}: error: {}", file_name, e.loc.line, e.loc.col, e.message));
  }
}

}  // namespace stowage::ir
