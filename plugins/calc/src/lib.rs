//! `calc`: arithmetic for agents.
//!
//! One tool, `evaluate`, computes the value of an arithmetic expression such as
//! `2 * (3 + 4) - 2^3` or `sqrt(16) + sin(pi / 2)`. The parser is a small
//! hand-written recursive descent over characters that evaluates as it parses;
//! it needs no workspace and no configuration.
//!
//! Grammar (lowest precedence first):
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/' | '%') unary)*
//! unary   := ('+' | '-') unary | power
//! power   := primary ('^' unary)?          right-associative, binds tighter than unary minus
//! primary := number | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! So `-2^2` is `-(2^2)` = -4, `2^3^2` is `2^(3^2)` = 512 and `2^-1` is 0.5.
//! Errors are for the agent to fix and name a 1-based character position.

use toolhost_sdk::{Deserialize, Json, JsonSchema, Serialize, ToolError};

/// Longest accepted expression, in characters.
pub const MAX_CHARS: usize = 10_000;

/// Deepest accepted nesting of parentheses, function calls, signs and powers.
/// Bounds the parser's recursion so `((((…` cannot overflow the stack.
pub const MAX_DEPTH: usize = 200;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EvaluateInput {
    /// The expression, e.g. `2 * (3 + 4) - 2^3` or `sqrt(2) * sin(pi / 4)`.
    #[schemars(length(max = 10000))]
    expression: String,
}

/// The value of an expression.
#[derive(Serialize, JsonSchema)]
struct Evaluation {
    /// The expression as given.
    expression: String,
    /// Its value.
    value: f64,
}

fn evaluate(input: EvaluateInput) -> Result<Json<Evaluation>, ToolError> {
    let value = eval(&input.expression).map_err(ToolError::invalid_input)?;
    Ok(Json(Evaluation {
        expression: input.expression,
        value,
    }))
}

toolhost_sdk::toolkit! {
    evaluate: "Evaluate an arithmetic expression and return its numeric value. \
        Operators: + - * / % (remainder) and ^ (power, right-associative; -2^2 = -4), \
        unary minus, parentheses. Numbers like 3, 0.5, 1e-3. Constants: pi, e. \
        Functions of one argument: sqrt abs ln log10 log2 exp sin cos tan asin acos atan \
        (radians) floor ceil round; min(a, b, ...) and max(a, b, ...); pow(x, y). \
        Example: `2 * (3 + 4) - 2^3` gives 6.",
}

/// Evaluate `expression`; the error is a message for the agent.
pub fn eval(expression: &str) -> Result<f64, String> {
    let chars: Vec<char> = expression.chars().collect();
    if chars.len() > MAX_CHARS {
        return Err(format!(
            "expression is {} characters long; the limit is {MAX_CHARS}",
            chars.len()
        ));
    }
    if chars.iter().all(|c| c.is_whitespace()) {
        return Err("empty expression".to_owned());
    }
    let mut parser = Parser {
        tokens: tokenize(&chars)?,
        next: 0,
        depth: 0,
        eval_error: None,
    };
    let value = parser.expr()?;
    let token = parser.peek();
    match token.kind {
        Kind::End => {}
        Kind::RParen => return Err(format!("unmatched `)` at position {}", token.pos)),
        _ => return Err(unexpected(token)),
    }
    // Syntax errors take precedence; then the first arithmetic error, if any.
    if let Some(error) = parser.eval_error {
        return Err(error);
    }
    if !value.is_finite() {
        return Err("result is not a finite number".to_owned());
    }
    // Report -0 as 0.
    Ok(if value == 0.0 { 0.0 } else { value })
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Number(f64),
    Name(String),
    Op(char),
    LParen,
    RParen,
    Comma,
    End,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    /// The source text, for messages.
    text: String,
    /// 1-based character position of its first character.
    pos: usize,
}

fn tokenize(chars: &[char]) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        let kind = if c.is_whitespace() {
            i += 1;
            continue;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            i = scan_number(chars, i);
            let text: String = chars[start..i].iter().collect();
            match text.parse::<f64>() {
                Ok(n) => Kind::Number(n),
                Err(_) => {
                    return Err(format!(
                        "malformed number `{text}` at position {}",
                        start + 1
                    ));
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            Kind::Name(chars[start..i].iter().collect())
        } else {
            i += 1;
            match c {
                '+' | '-' | '*' | '/' | '%' | '^' => Kind::Op(c),
                '(' => Kind::LParen,
                ')' => Kind::RParen,
                ',' => Kind::Comma,
                _ => {
                    return Err(format!(
                        "unexpected character `{c}` at position {}",
                        start + 1
                    ));
                }
            }
        };
        tokens.push(Token {
            kind,
            text: chars[start..i].iter().collect(),
            pos: start + 1,
        });
    }
    tokens.push(Token {
        kind: Kind::End,
        text: String::new(),
        pos: chars.len() + 1,
    });
    Ok(tokens)
}

/// The end of the number starting at `i`: digits, an optional fraction and an
/// optional exponent (`e`/`E`, optional sign, digits). An `e` not followed by
/// digits is left alone (it is then the constant `e`, and a syntax error).
fn scan_number(chars: &[char], mut i: usize) -> usize {
    let digits = |mut i: usize| {
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    i = digits(i);
    if chars.get(i) == Some(&'.') {
        i = digits(i + 1);
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        let mut j = i + 1;
        if matches!(chars.get(j), Some('+' | '-')) {
            j += 1;
        }
        if chars.get(j).is_some_and(char::is_ascii_digit) {
            i = digits(j);
        }
    }
    i
}

fn unexpected(token: &Token) -> String {
    match token.kind {
        Kind::End => format!("unexpected end of expression at position {}", token.pos),
        _ => format!("unexpected `{}` at position {}", token.text, token.pos),
    }
}

/// Recursive-descent parser that evaluates as it goes.
struct Parser {
    tokens: Vec<Token>,
    next: usize,
    depth: usize,
    /// The first arithmetic error (e.g. division by zero). Parsing carries on
    /// with NaN so that a later syntax error is reported first.
    eval_error: Option<String>,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.tokens[self.next]
    }

    fn advance(&mut self) -> Token {
        let token = self.tokens[self.next].clone();
        if token.kind != Kind::End {
            self.next += 1;
        }
        token
    }

    fn eat(&mut self, kind: &Kind) -> bool {
        if &self.peek().kind == kind {
            self.advance();
            true
        } else {
            false
        }
    }

    /// Record an arithmetic error and continue with NaN.
    fn fail(&mut self, message: String) -> f64 {
        self.eval_error.get_or_insert(message);
        f64::NAN
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        loop {
            if self.eat(&Kind::Op('+')) {
                value += self.term()?;
            } else if self.eat(&Kind::Op('-')) {
                value -= self.term()?;
            } else {
                return Ok(value);
            }
        }
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        loop {
            let op = match self.peek().kind {
                Kind::Op(op @ ('*' | '/' | '%')) => op,
                _ => return Ok(value),
            };
            let pos = self.advance().pos;
            let rhs = self.unary()?;
            value = match op {
                '*' => value * rhs,
                _ if rhs == 0.0 => self.fail(format!("division by zero at position {pos}")),
                '/' => value / rhs,
                _ => value % rhs,
            };
        }
    }

    /// Every recursion passes through here, so this is where depth is bounded.
    fn unary(&mut self) -> Result<f64, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!(
                "expression nests deeper than {MAX_DEPTH} levels (at position {})",
                self.peek().pos
            ));
        }
        self.depth += 1;
        let result = if self.eat(&Kind::Op('-')) {
            self.unary().map(|v| -v)
        } else if self.eat(&Kind::Op('+')) {
            self.unary()
        } else {
            self.power()
        };
        self.depth -= 1;
        result
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.primary()?;
        if self.eat(&Kind::Op('^')) {
            // The exponent may carry its own sign (`2^-1`) and is itself a power
            // (`2^3^2` = `2^(3^2)`).
            let exponent = self.unary()?;
            Ok(base.powf(exponent))
        } else {
            Ok(base)
        }
    }

    fn primary(&mut self) -> Result<f64, String> {
        let token = self.advance();
        match token.kind {
            Kind::Number(n) => Ok(n),
            Kind::LParen => {
                let value = self.expr()?;
                self.close(&token)?;
                Ok(value)
            }
            Kind::Name(ref name) => {
                if self.peek().kind == Kind::LParen {
                    let open = self.advance();
                    let args = self.arguments(&open)?;
                    self.call(name, &args, token.pos)
                } else {
                    constant(name, token.pos)
                }
            }
            _ => Err(unexpected(&token)),
        }
    }

    /// Comma-separated arguments after `open`, through the closing `)`.
    fn arguments(&mut self, open: &Token) -> Result<Vec<f64>, String> {
        let mut args = vec![self.expr()?];
        while self.eat(&Kind::Comma) {
            args.push(self.expr()?);
        }
        self.close(open)?;
        Ok(args)
    }

    /// Expect the `)` matching `open`.
    fn close(&mut self, open: &Token) -> Result<(), String> {
        let token = self.peek();
        match token.kind {
            Kind::RParen => {
                self.advance();
                Ok(())
            }
            Kind::End => Err(format!("missing `)` for the `(` at position {}", open.pos)),
            _ => Err(format!(
                "unexpected `{}` at position {} (expected `)` for the `(` at position {})",
                token.text, token.pos, open.pos
            )),
        }
    }

    fn call(&mut self, name: &str, args: &[f64], pos: usize) -> Result<f64, String> {
        let arity = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                let plural = if n == 1 { "" } else { "s" };
                Err(format!(
                    "`{name}` at position {pos} takes {n} argument{plural}, got {}",
                    args.len()
                ))
            }
        };
        let value = match name {
            "min" | "max" => {
                let fold = if name == "min" { f64::min } else { f64::max };
                args.iter().copied().reduce(fold).unwrap_or(f64::NAN)
            }
            "pow" => {
                arity(2)?;
                args[0].powf(args[1])
            }
            _ => {
                let f = function(name).ok_or_else(|| match constant(name, pos) {
                    Ok(_) => format!("`{name}` at position {pos} is a constant, not a function"),
                    Err(_) => format!("unknown function `{name}` at position {pos}"),
                })?;
                arity(1)?;
                let x = args[0];
                if let Some(domain) = outside_domain(name, x) {
                    return Ok(self.fail(format!(
                        "`{name}` at position {pos} is undefined for {x}: {domain}"
                    )));
                }
                f(x)
            }
        };
        Ok(value)
    }
}

fn constant(name: &str, pos: usize) -> Result<f64, String> {
    match name {
        "pi" => Ok(std::f64::consts::PI),
        "e" => Ok(std::f64::consts::E),
        _ if function(name).is_some() || matches!(name, "min" | "max" | "pow") => Err(format!(
            "function `{name}` at position {pos} needs its arguments in parentheses, e.g. `{name}(2)`"
        )),
        _ => Err(format!(
            "unknown name `{name}` at position {pos} (the constants are pi and e)"
        )),
    }
}

/// The functions of one argument.
fn function(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "sqrt" => f64::sqrt,
        "abs" => f64::abs,
        "ln" => f64::ln,
        "log10" => f64::log10,
        "log2" => f64::log2,
        "exp" => f64::exp,
        "sin" => f64::sin,
        "cos" => f64::cos,
        "tan" => f64::tan,
        "asin" => f64::asin,
        "acos" => f64::acos,
        "atan" => f64::atan,
        "floor" => f64::floor,
        "ceil" => f64::ceil,
        "round" => f64::round,
        _ => return None,
    })
}

/// Why `x` is outside the domain of the function `name`, if it is.
fn outside_domain(name: &str, x: f64) -> Option<&'static str> {
    match name {
        "sqrt" if x < 0.0 => Some("the argument must not be negative"),
        "ln" | "log10" | "log2" if x <= 0.0 => Some("the argument must be positive"),
        "asin" | "acos" if !(-1.0..=1.0).contains(&x) => {
            Some("the argument must be between -1 and 1")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(expression: &str) -> f64 {
        eval(expression).unwrap_or_else(|e| panic!("{expression}: {e}"))
    }

    fn err(expression: &str) -> String {
        match eval(expression) {
            Ok(v) => panic!("{expression}: expected an error, got {v}"),
            Err(e) => e,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn numbers() {
        assert_eq!(ok("42"), 42.0);
        assert_eq!(ok("  3.25 "), 3.25);
        assert_eq!(ok(".5"), 0.5);
        assert_eq!(ok("5."), 5.0);
        assert_eq!(ok("1e3"), 1000.0);
        assert_eq!(ok("1E+2"), 100.0);
        assert_eq!(ok("1e-3"), 0.001);
        assert_eq!(ok("2.5e-1"), 0.25);
    }

    #[test]
    fn precedence() {
        assert_eq!(ok("2 * (3 + 4) - 2^3"), 6.0);
        assert_eq!(ok("1 + 2 * 3"), 7.0);
        assert_eq!(ok("(1 + 2) * 3"), 9.0);
        assert_eq!(ok("2 * 3^2"), 18.0);
        assert_eq!(ok("10 - 4 / 2"), 8.0);
        assert_eq!(ok("7 % 4 + 1"), 4.0);
        assert_eq!(ok("1 + 7 % 4 * 2"), 7.0);
    }

    #[test]
    fn associativity() {
        assert_eq!(ok("10 - 3 - 2"), 5.0);
        assert_eq!(ok("64 / 4 / 2"), 8.0);
        assert_eq!(ok("2^3^2"), 512.0);
        assert_eq!(ok("17 % 10 % 4"), 3.0);
    }

    #[test]
    fn unary_signs() {
        assert_eq!(ok("-2^2"), -4.0);
        assert_eq!(ok("(-2)^2"), 4.0);
        assert_eq!(ok("2^-1"), 0.5);
        assert_eq!(ok("2^-2^2"), 2f64.powf(-4.0));
        assert_eq!(ok("--3"), 3.0);
        assert_eq!(ok("+-+3"), -3.0);
        assert_eq!(ok("3 - -3"), 6.0);
        assert_eq!(ok("2 * -3"), -6.0);
        assert_eq!(ok("-0"), 0.0);
        assert!(ok("-0").is_sign_positive());
    }

    #[test]
    fn remainder_takes_the_sign_of_the_dividend() {
        assert_eq!(ok("-7 % 3"), -1.0);
        assert_eq!(ok("7.5 % 2"), 1.5);
    }

    #[test]
    fn constants_and_functions() {
        assert!(close(ok("pi"), std::f64::consts::PI));
        assert!(close(ok("e"), std::f64::consts::E));
        assert_eq!(ok("sqrt(16) + 1"), 5.0);
        assert_eq!(ok("abs(-3)"), 3.0);
        assert!(close(ok("ln(e^2)"), 2.0));
        assert_eq!(ok("log10(1000)"), 3.0);
        assert_eq!(ok("log2(8)"), 3.0);
        assert!(close(ok("exp(1)"), std::f64::consts::E));
        assert!(close(ok("sin(pi / 2)"), 1.0));
        assert!(close(ok("cos(0)"), 1.0));
        assert!(close(ok("tan(pi / 4)"), 1.0));
        assert!(close(ok("asin(1)"), std::f64::consts::FRAC_PI_2));
        assert!(close(ok("acos(1)"), 0.0));
        assert!(close(ok("atan(1) * 4"), std::f64::consts::PI));
        assert_eq!(ok("floor(2.7) + ceil(2.1) + round(2.5)"), 8.0);
        assert_eq!(ok("round(-2.5)"), -3.0);
        assert_eq!(ok("min(3, 1, 2)"), 1.0);
        assert_eq!(ok("max(3, 1 + 9, 2)"), 10.0);
        assert_eq!(ok("min(4)"), 4.0);
        assert_eq!(ok("pow(2, 10)"), 1024.0);
        assert_eq!(ok("sqrt(sqrt(16))^2"), 4.0);
        assert_eq!(ok("-sqrt(4)"), -2.0);
    }

    #[test]
    fn syntax_errors_name_the_position() {
        assert_eq!(err("(1 + 2))"), "unmatched `)` at position 8");
        assert_eq!(err("1 + )"), "unexpected `)` at position 5");
        assert_eq!(err("1 +"), "unexpected end of expression at position 4");
        assert_eq!(err("2 3"), "unexpected `3` at position 3");
        assert_eq!(err("1 $ 2"), "unexpected character `$` at position 3");
        assert_eq!(err("1.2.3"), "unexpected `.3` at position 4");
        assert_eq!(err("2e"), "unexpected `e` at position 2");
        assert_eq!(err("* 2"), "unexpected `*` at position 1");
        assert_eq!(err("min(1,)"), "unexpected `)` at position 7");
        assert_eq!(err("()"), "unexpected `)` at position 2");
    }

    #[test]
    fn positions_count_characters_not_bytes() {
        assert_eq!(
            err("π + )"),
            "unknown name `π` at position 1 (the constants are pi and e)"
        );
        assert_eq!(err("\"é\" )"), "unexpected character `\"` at position 1");
        assert_eq!(err("ééé(1"), "missing `)` for the `(` at position 4");
    }

    #[test]
    fn missing_parenthesis() {
        assert_eq!(err("(1 + 2"), "missing `)` for the `(` at position 1");
        assert_eq!(err("sqrt(4"), "missing `)` for the `(` at position 5");
        assert_eq!(
            err("(1 2)"),
            "unexpected `2` at position 4 (expected `)` for the `(` at position 1)"
        );
    }

    #[test]
    fn names_and_calls() {
        assert_eq!(err("foo(1)"), "unknown function `foo` at position 1");
        assert_eq!(
            err("x + 1"),
            "unknown name `x` at position 1 (the constants are pi and e)"
        );
        assert_eq!(
            err("sqrt 4"),
            "function `sqrt` at position 1 needs its arguments in parentheses, e.g. `sqrt(2)`"
        );
        assert_eq!(
            err("pi(2)"),
            "`pi` at position 1 is a constant, not a function"
        );
        assert_eq!(
            err("sqrt(1, 2)"),
            "`sqrt` at position 1 takes 1 argument, got 2"
        );
        assert_eq!(
            err("1 + pow(2)"),
            "`pow` at position 5 takes 2 arguments, got 1"
        );
        assert_eq!(err("max()"), "unexpected `)` at position 5");
    }

    #[test]
    fn arithmetic_errors() {
        assert_eq!(err("1/0"), "division by zero at position 2");
        assert_eq!(err("5 % (2 - 2)"), "division by zero at position 3");
        assert_eq!(
            err("1 / 0 / 0"),
            "division by zero at position 3",
            "the first one"
        );
        assert_eq!(
            err("1/0 + )"),
            "unexpected `)` at position 7",
            "syntax errors first"
        );
        assert_eq!(
            err("sqrt(-1)"),
            "`sqrt` at position 1 is undefined for -1: the argument must not be negative"
        );
        assert!(err("ln(0)").contains("the argument must be positive"));
        assert!(err("asin(2)").contains("between -1 and 1"));
        assert_eq!(err("10^400"), "result is not a finite number");
        assert_eq!(err("0^-1"), "result is not a finite number");
        assert_eq!(err("(-8)^(1/3)"), "result is not a finite number");
        // An intermediate overflow that ends finite is fine.
        assert_eq!(ok("1 / 10^400"), 0.0);
    }

    #[test]
    fn empty_and_too_long() {
        assert_eq!(err(""), "empty expression");
        assert_eq!(err("  \t\n"), "empty expression");
        let long = "1+".repeat(5_000) + "1";
        assert!(err(&long).contains("the limit is 10000"));
        let fits = "1+".repeat(4_999) + "1";
        assert_eq!(ok(&fits), 5_000.0);
    }

    #[test]
    fn depth_limit() {
        let nested = |n: usize| format!("{}1{}", "(".repeat(n), ")".repeat(n));
        assert_eq!(ok(&nested(MAX_DEPTH - 1)), 1.0);
        assert!(err(&nested(MAX_DEPTH)).starts_with("expression nests deeper than 200 levels"));
        // Unclosed, as long as the input allows: refused without overflowing.
        assert!(err(&"(".repeat(MAX_CHARS)).starts_with("expression nests deeper than 200 levels"));
        assert!(err(&"-".repeat(MAX_CHARS)).starts_with("expression nests deeper than 200 levels"));
        assert!(err(&"sqrt(".repeat(2_000)).starts_with("expression nests deeper than 200 levels"));
        assert!(err(&"2^".repeat(5_000)).starts_with("expression nests deeper than 200 levels"));
        // Long flat expressions are not nesting.
        assert_eq!(ok(&"-1".repeat(3_000)), -3_000.0);
    }

    #[test]
    fn tool_returns_typed_json() {
        let Json(out) = evaluate(EvaluateInput {
            expression: "6*7".into(),
        })
        .unwrap_or_else(|_| panic!("6*7 evaluates"));
        assert_eq!((out.expression.as_str(), out.value), ("6*7", 42.0));
        let error = evaluate(EvaluateInput {
            expression: "1/0".into(),
        });
        assert!(matches!(error, Err(ToolError::InvalidInput(m)) if m.contains("division by zero")));
    }
}
