// GBNF parsing, semantics and build-time errors. The sample grammars are ours, written in the
// style of llama.cpp's grammars/ folder (json, arithmetic, list, a C-like one, Japanese).
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/test_util.h"

namespace glm::grammar {
namespace {

using testing::accepted_prefix;
using testing::accepts;
using testing::accepts_bytewise;

Grammar must_parse(std::string_view text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : *parse_gbnf("root ::= \"\"");
}

std::string error_of(std::string_view text) {
  auto g = parse_gbnf(text);
  return g.ok() ? "<no error>" : g.status().message();
}

constexpr const char* kJson = R"g(# JSON values; whitespace is bounded
root    ::= element
element ::= ws value ws
value   ::= obj | arr | str | num | "true" | "false" | "null"
obj     ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= str ws ":" element
arr     ::= "[" ws ( element ( "," element )* )? "]"
str     ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
num     ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]{0,8}
)g";

TEST(GrammarGbnf, JsonSample) {
  Grammar g = must_parse(kJson);
  for (const char* ok : {R"({"a": [1, 2.5e-3, true, null], "b": {"c": "d\u00e9\n"}})", "[]",
                         " -0.5 ", R"("\\\"")", R"({"k":"日本語"})", "{}"}) {
    EXPECT_TRUE(accepts_bytewise(g, ok)) << ok;
    EXPECT_TRUE(accepts(g, ok)) << ok;
  }
  EXPECT_EQ(accepted_prefix(g, R"({"a": 01})"), 7u);  // leading zero
  EXPECT_EQ(accepted_prefix(g, R"({"a" 1})"), 5u);    // missing colon
  EXPECT_EQ(accepted_prefix(g, "[1,]"), 3u);
  EXPECT_EQ(accepted_prefix(g, "\"a\tb\""), 2u);  // raw control char in a string
  EXPECT_EQ(accepted_prefix(g, "\"\\q\""), 2u);   // bad escape
  // ws{0,8} twice (after '[' and before the element): the 17th space is refused.
  EXPECT_EQ(accepted_prefix(g, "[" + std::string(17, ' ') + "1]"), 17u);
  EXPECT_FALSE(accepts(g, R"({"a":1)"));  // incomplete
}

TEST(GrammarGbnf, ArithmeticSample) {
  Grammar g = must_parse(R"g(
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] ws term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t]*
)g");
  EXPECT_TRUE(accepts_bytewise(g, "1+2=3\n"));
  EXPECT_TRUE(accepts_bytewise(g, "(a_1 * 2) / x = 7\nb-c=d\n"));
  EXPECT_FALSE(accepts(g, "1+2=3"));  // needs the newline
  EXPECT_EQ(accepted_prefix(g, "1++2=3\n"), 2u);
  EXPECT_EQ(accepted_prefix(g, "(1+2=3\n"), 4u);
}

TEST(GrammarGbnf, ListSample) {
  Grammar g = must_parse("root ::= (\"- \" item)+\nitem ::= [^\\n]+ \"\\n\"\n");
  EXPECT_TRUE(accepts(g, "- milk\n- 2 eggs\n"));
  EXPECT_FALSE(accepts(g, "- \n"));  // an empty item
  EXPECT_FALSE(accepts(g, ""));      // at least one
  EXPECT_EQ(accepted_prefix(g, "- a\n* b\n"), 4u);
}

TEST(GrammarGbnf, CLikeSample) {
  Grammar g = must_parse(R"g(
root        ::= ( function ws )+
function    ::= type ws ident ws "(" ws params? ")" ws block
params      ::= type ws ident ws ( "," ws type ws ident ws )*
type        ::= "int" | "float" | "void" | "char" "*"?
block       ::= "{" ws ( statement ws )* "}"
statement   ::= type ws ident ws ( "=" ws expr ws )? ";"
              | "return" ( ws expr )? ws ";"
              | "if" ws "(" ws expr ws ")" ws block ( ws "else" ws block )?
              | "while" ws "(" ws expr ws ")" ws block
              | ident ws "=" ws expr ws ";"
expr        ::= operand ( ws op ws operand )*
operand     ::= ident ( "(" ws ( expr ( "," ws expr )* )? ")" )? | [0-9]+ | "(" ws expr ws ")"
op          ::= [-+*/<>] | "==" | "!=" | "<=" | ">="
ident       ::= [a-zA-Z_] [a-zA-Z_0-9]*
ws          ::= ( [ \t\n] | "//" [^\n]* "\n" )*
)g");
  EXPECT_TRUE(accepts_bytewise(
      g,
      "int add(int a, int b) { return a + b; }\n"
      "void main() {\n  int x = add(1, 2); // three\n  while (x < 10) { x = x * 2; }\n"
      "  if (x == 16) { return; } else { x = 0; }\n}\n"));
  EXPECT_FALSE(accepts(g, "int f() { return 1 }"));  // missing ';'
  EXPECT_EQ(accepted_prefix(g, "int f( { }"), 7u);
}

TEST(GrammarGbnf, JapaneseCharClasses) {
  Grammar g = must_parse(R"g(
# sentences of hiragana, katakana and kanji, ended by 。
root      ::= sentence+
sentence  ::= ( hiragana | katakana | kanji | "、" )+ "。"
hiragana  ::= [ぁ-ゟ]
katakana  ::= [ァ-ヿ]
kanji     ::= [一-鿿々]
)g");
  EXPECT_TRUE(accepts_bytewise(g, "今日は、いい天気ですね。コーヒーを飲みます。"));
  EXPECT_FALSE(accepts(g, "hello。"));
  EXPECT_FALSE(accepts(g, "今日は"));  // no 。
  // Every prefix of a multi-byte character is a live state; a wrong continuation is not.
  EXPECT_EQ(accepted_prefix(g, "\xE4\xBB"), 2u);
  EXPECT_EQ(accepted_prefix(g, "\xE4\x41"), 1u);
  // 한 (Hangul, U+D55C) is outside every class: rejected at its first byte? No, ED is the
  // lead of U+D000-U+DFFF, none of which is in the classes.
  EXPECT_EQ(accepted_prefix(g, "\xED\x95\x9C"), 0u);
}

TEST(GrammarGbnf, Syntax) {
  // Escapes in literals and classes.
  Grammar g = must_parse(R"(root ::= "\x41\u00e9\U0001F600\t\"\\" [\x30-\x39\]] )");
  EXPECT_TRUE(accepts(g, "A\xC3\xA9\xF0\x9F\x98\x80\t\"\\5"));
  EXPECT_TRUE(accepts(g, "A\xC3\xA9\xF0\x9F\x98\x80\t\"\\]"));
  // Repetition forms.
  Grammar r = must_parse("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"{,1} \"e\"{2,3}\n");
  EXPECT_TRUE(accepts(r, "aabee"));
  EXPECT_TRUE(accepts(r, "aabbbccdeee"));
  EXPECT_FALSE(accepts(r, "abee"));
  EXPECT_FALSE(accepts(r, "aabcccee"));
  EXPECT_FALSE(accepts(r, "aabeeee"));
  // '.', negation, comments, alternatives continued on the next line (both styles).
  Grammar d = must_parse(
      "root ::= . [^a-c]   # any, then not a-c\n  | \"x\" |\n  \"y\"\n"
      "  | \"z\"\n");
  EXPECT_TRUE(accepts(d,
                      "\xE2\x82\xAC"
                      "d"));
  EXPECT_FALSE(accepts(d, "zb"));
  EXPECT_TRUE(accepts(d, "x"));
  EXPECT_TRUE(accepts(d, "y"));
  EXPECT_TRUE(accepts(d, "z"));
  // Rules may be used before they are defined; newlines inside parentheses.
  Grammar f = must_parse("root ::= (\n  a\n  | b\n)\na ::= \"1\"\nb ::= \"2\"\n");
  EXPECT_TRUE(accepts(f, "1"));
  EXPECT_TRUE(accepts(f, "2"));
  // Empty alternatives and the empty literal.
  Grammar e = must_parse("root ::= \"a\" ( | \"b\" ) \"\"\n");
  EXPECT_TRUE(accepts(e, "a"));
  EXPECT_TRUE(accepts(e, "ab"));
}

TEST(GrammarGbnf, Errors) {
  EXPECT_EQ(error_of("root ::= \"a\" vaule\n"), "line 1, column 14: undefined rule 'vaule'");
  EXPECT_EQ(error_of("root ::= (\"a\" | \"b\"\nx ::= \"c\"\n"),
            "line 1, column 10: unbalanced parentheses: this '(' is never closed");
  EXPECT_EQ(error_of("root ::= \"a\")\n"),
            "line 1, column 13: unbalanced parentheses: unexpected ')'");
  EXPECT_EQ(error_of("root ::= \"a\\q\"\n"), "line 1, column 12: bad escape '\\q'");
  EXPECT_EQ(error_of("root ::= [\\\n]\n"), "line 1, column 11: bad escape '\\\\x0A'");
  EXPECT_EQ(error_of("root ::= \"\\x4\"\n"),
            "line 1, column 11: bad escape '\\x': expected 2 hex digits");
  EXPECT_EQ(error_of("root ::= \"\\uD800\"\n"),
            "line 1, column 11: bad escape: not a Unicode scalar value");
  EXPECT_EQ(error_of(""), "line 1, column 1: empty grammar: no rules");
  EXPECT_EQ(error_of("  # only a comment\n\n"), "line 3, column 1: empty grammar: no rules");
  EXPECT_EQ(error_of("start ::= \"a\"\n"), "no start rule 'root'");
  EXPECT_EQ(error_of("root ::= \"abc\n"), "line 1, column 10: unterminated string literal");
  EXPECT_EQ(error_of("root ::= [a-z\n"),
            "line 1, column 10: unterminated character class: expected ']'");
  EXPECT_EQ(error_of("root ::= [z-a]\n"), "line 1, column 13: character range is backwards");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}\n"), "line 1, column 13: repetition {m,n} has n < m");
  EXPECT_EQ(error_of("root ::= \"a\"{x}\n"),
            "line 1, column 13: bad repetition: expected {m}, {m,}, {m,n} or {,n}");
  EXPECT_EQ(error_of("root ::= * \"a\"\n"),
            "line 1, column 10: repetition operator with nothing to repeat");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\"\n"),
            "line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(error_of("root ::= <think>\n"),
            "line 1, column 10: token references (<...>) are not supported; write the text");
  EXPECT_EQ(error_of("root \"a\"\n"), "line 1, column 6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= \"a\" ; \n"), "line 1, column 14: unexpected character ';'");
  EXPECT_EQ(error_of("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')')),
            "line 1, column 210: parentheses nested too deeply");
  EXPECT_EQ(error_of("root ::= [^\\x00-\\U0010FFFF]\n"),
            "line 1, column 10: character class matches nothing");
}

TEST(GrammarGbnf, LeftRecursionIsRefused) {
  EXPECT_EQ(error_of("root ::= root \"a\" | \"b\"\n"),
            "left recursion in rule 'root' at line 1, column 1: it can start with itself "
            "(rewrite it as a repetition, e.g. a ::= b (\"+\" b)*)");
  // Indirect, and hidden behind a rule that can be empty.
  EXPECT_NE(error_of("root ::= a\na ::= b \"x\"\nb ::= opt a | \"y\"\nopt ::= \"z\"?\n")
                .find("left recursion"),
            std::string::npos);
  // A repetition of something that can be empty would loop without consuming input.
  EXPECT_NE(error_of("root ::= (\"a\"?)*\n").find("left recursion in rule 'root-"),
            std::string::npos);
  // Right recursion is fine.
  Grammar g = must_parse("root ::= \"a\" root | \"b\"\n");
  EXPECT_TRUE(accepts(g, "aaab"));
}

TEST(GrammarGbnf, ImpossibleGrammarIsRefused) {
  // A rule that can never finish: every expansion needs itself again.
  EXPECT_EQ(error_of("root ::= \"a\" root\n"),
            "rule 'root' at line 1, column 1 can never finish: no finite text matches it");
  EXPECT_EQ(error_of("root ::= \"x\" | \"y\" loop\nloop ::= \"z\" loop\n"),
            "rule 'loop' at line 2, column 1 can never finish: no finite text matches it");
  // Unreachable rules are not checked for finishing (they are never used).
  EXPECT_TRUE(parse_gbnf("root ::= \"x\"\nunused ::= \"z\" unused\n").ok());
}

TEST(GrammarGbnf, ToGbnfRoundTrip) {
  Grammar g = must_parse(kJson);
  std::string text = g.to_gbnf();
  auto g2 = parse_gbnf(text);
  ASSERT_TRUE(g2.ok()) << g2.status().to_string() << "\n" << text;
  for (const char* s : {R"({"a": [1, -2.5e+3, "x\"y"]})", "[]", "\"\\u00e9\""}) {
    EXPECT_TRUE(accepts(*g2, s)) << s;
  }
  EXPECT_FALSE(accepts(*g2, "[1,]"));
}

TEST(GrammarBuilder, ComposesRules) {
  GrammarBuilder b;
  ASSERT_TRUE(b.add_gbnf("digits ::= [0-9]+\n").ok());
  ASSERT_TRUE(b.add_rule("call", Expr::seq({Expr::literal("get_weather"), Expr::literal("\n"),
                                            Expr::ref("digits")}))
                  .ok());
  ASSERT_TRUE(b.add_rule("root", Expr::alt({Expr::ref("call"), Expr::literal("none")})).ok());
  EXPECT_FALSE(b.add_rule("call", Expr::literal("x")).ok());
  EXPECT_FALSE(b.add_rule("bad name", Expr::literal("x")).ok());
  EXPECT_EQ(b.fresh_name("call"), "call-2");
  EXPECT_EQ(b.fresh_name("my_fn.args"), "my-fn-args");
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_TRUE(accepts(*g, "get_weather\n42"));
  EXPECT_TRUE(accepts(*g, "none"));
  EXPECT_FALSE(accepts(*g, "get_weather\n"));
  // Same builder, another start rule.
  auto d = b.build("digits");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(accepts(*d, "123"));
  EXPECT_EQ(b.build("nope").status().message(), "no start rule 'nope'");
  GrammarBuilder empty;
  EXPECT_EQ(empty.build().status().message(), "empty grammar: no rules");
  GrammarBuilder bad;
  ASSERT_TRUE(bad.add_rule("root", Expr::repeat(Expr::literal("a"), 3, 2)).ok());
  EXPECT_EQ(bad.build().status().message(), "bad repetition bounds {3,2}");
}

}  // namespace
}  // namespace glm::grammar
