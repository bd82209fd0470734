//! Calico's selector expressions, the subset prober reads: `k == 'v'`, `k != 'v'`, `has(k)`,
//! `!has(k)`, `k in {'a', 'b'}`, `k not in {...}`, `all()`, `!`, `&&`, `||` and parentheses.
//! Anything else (`global()`, `contains`, `starts with`, `ends with`, ...) is refused with its
//! text, so the policy is "cannot evaluate", never guessed.

use std::collections::BTreeMap;

/// The longest selector read. Calico's own are a line or two; a set of a few hundred namespace
/// names still fits. Longer ones come from a generator gone wrong or from someone probing the
/// prober, and are a note, not an evaluation (the policy's verdict is "cannot evaluate").
pub(in crate::diagnose) const MAX_BYTES: usize = 16 * 1024;
/// The deepest nesting of `!` and parentheses read. Parsing and matching recurse once per
/// level, so this bounds the stack whatever the input; `&&` and `||` chains are flat lists and
/// cost no depth.
pub(in crate::diagnose) const MAX_DEPTH: usize = 64;
/// How much of a selector a message quotes.
const QUOTED: usize = 60;

/// Why a selector is not evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(in crate::diagnose) enum SelectorError {
    #[error("selector {quoted}: {bytes} bytes, more than the {MAX_BYTES} prober evaluates")]
    TooLong { quoted: String, bytes: usize },
    #[error("selector {quoted}: nested deeper than the {MAX_DEPTH} levels prober evaluates")]
    TooDeep { quoted: String },
    #[error("selector {quoted}: {why}")]
    Unreadable { quoted: String, why: String },
}

/// The start of `text`, quoted, for a message: a selector can be kilobytes long.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &text[..cut], text.len()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::diagnose) enum Expr {
    All,
    Eq(String, String),
    Ne(String, String),
    Has(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Not(Box<Expr>),
    /// Every one holds: a chain of `&&` is one list, not a nesting per term.
    And(Vec<Expr>),
    /// Some one holds.
    Or(Vec<Expr>),
}

impl Expr {
    /// Parses `text`; an empty selector is `all()`. Longer than [`MAX_BYTES`] or nested deeper
    /// than [`MAX_DEPTH`] is refused, so that neither parsing, matching nor dropping the
    /// expression can exhaust the stack.
    pub(in crate::diagnose) fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.len() > MAX_BYTES {
            return Err(SelectorError::TooLong {
                quoted: quoted(text),
                bytes: text.len(),
            });
        }
        // `why` quotes a token, which can be as long as the selector: cut it too.
        let unreadable = |why: String| SelectorError::Unreadable {
            quoted: quoted(text),
            why: match why.char_indices().nth(2 * QUOTED) {
                Some((cut, _)) => format!("{}...", &why[..cut]),
                None => why,
            },
        };
        let tokens = lex(text).map_err(unreadable)?;
        if tokens.is_empty() {
            return Ok(Self::All);
        }
        let mut p = Parser {
            t: &tokens,
            i: 0,
            depth: 0,
        };
        let e = match p.or() {
            Ok(e) => e,
            Err(Refusal::TooDeep) => {
                return Err(SelectorError::TooDeep {
                    quoted: quoted(text),
                });
            }
            Err(Refusal::Unreadable(why)) => return Err(unreadable(why)),
        };
        if p.i != tokens.len() {
            return Err(unreadable(format!(
                "cannot evaluate from {:?}",
                tokens[p.i]
            )));
        }
        Ok(e)
    }

    pub(in crate::diagnose) fn is_all(&self) -> bool {
        matches!(self, Self::All)
    }

    /// Recurses once per `!` or parenthesis: at most [`MAX_DEPTH`] deep.
    pub(in crate::diagnose) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::All => true,
            Self::Eq(k, v) => labels.get(k) == Some(v),
            Self::Ne(k, v) => labels.get(k) != Some(v),
            Self::Has(k) => labels.contains_key(k),
            Self::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Self::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Self::Not(e) => !e.matches(labels),
            Self::And(all) => all.iter().all(|e| e.matches(labels)),
            Self::Or(any) => any.iter().any(|e| e.matches(labels)),
        }
    }
}

/// Why the parser stopped.
enum Refusal {
    TooDeep,
    Unreadable(String),
}

impl From<String> for Refusal {
    fn from(why: String) -> Self {
        Self::Unreadable(why)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(String),
    EqEq,
    NotEq,
    Bang,
    AndAnd,
    OrOr,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let two = |s: &str| chars[i..].iter().take(2).collect::<String>() == s;
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => (out.push(Tok::LParen), i += 1).1,
            ')' => (out.push(Tok::RParen), i += 1).1,
            '{' => (out.push(Tok::LBrace), i += 1).1,
            '}' => (out.push(Tok::RBrace), i += 1).1,
            ',' => (out.push(Tok::Comma), i += 1).1,
            '=' if two("==") => (out.push(Tok::EqEq), i += 2).1,
            '!' if two("!=") => (out.push(Tok::NotEq), i += 2).1,
            '!' => (out.push(Tok::Bang), i += 1).1,
            '&' if two("&&") => (out.push(Tok::AndAnd), i += 2).1,
            '|' if two("||") => (out.push(Tok::OrOr), i += 2).1,
            '\'' | '"' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&d| d == c)
                    .ok_or_else(|| "unterminated string".to_string())?;
                out.push(Tok::Str(chars[i + 1..i + 1 + end].iter().collect()));
                i += end + 2;
            }
            c if c.is_ascii_alphanumeric() || "_./-".contains(c) => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || "_./-".contains(chars[i]))
                {
                    i += 1;
                }
                out.push(Tok::Word(chars[start..i].iter().collect()));
            }
            other => {
                return Err(format!("cannot evaluate the character {other:?}"));
            }
        }
    }
    Ok(out)
}

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
    /// The `!` and parentheses open around the current token.
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.t.get(self.i)
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == Some(tok) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &Tok) -> Result<(), String> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(format!("expected {tok:?}, found {:?}", self.peek()))
        }
    }

    fn or(&mut self) -> Result<Expr, Refusal> {
        let mut any = vec![self.and()?];
        while self.eat(&Tok::OrOr) {
            any.push(self.and()?);
        }
        Ok(if any.len() == 1 {
            any.swap_remove(0)
        } else {
            Expr::Or(any)
        })
    }

    fn and(&mut self) -> Result<Expr, Refusal> {
        let mut all = vec![self.unary()?];
        while self.eat(&Tok::AndAnd) {
            all.push(self.unary()?);
        }
        Ok(if all.len() == 1 {
            all.swap_remove(0)
        } else {
            Expr::And(all)
        })
    }

    /// One level deeper, refused past [`MAX_DEPTH`]: the recursion below is per level.
    fn nested(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<Expr, Refusal>,
    ) -> Result<Expr, Refusal> {
        if self.depth >= MAX_DEPTH {
            return Err(Refusal::TooDeep);
        }
        self.depth += 1;
        let e = f(self);
        self.depth -= 1;
        e
    }

    fn unary(&mut self) -> Result<Expr, Refusal> {
        if self.eat(&Tok::Bang) {
            return self.nested(|p| Ok(Expr::Not(Box::new(p.unary()?))));
        }
        if self.eat(&Tok::LParen) {
            return self.nested(|p| {
                let e = p.or()?;
                p.expect(&Tok::RParen)?;
                Ok(e)
            });
        }
        Ok(self.term()?)
    }

    /// A term without operators: `all()`, `has(k)`, `k == 'v'`, `k in {...}`, ...
    fn term(&mut self) -> Result<Expr, String> {
        let Some(Tok::Word(word)) = self.peek().cloned() else {
            return Err(format!("cannot evaluate from {:?}", self.peek()));
        };
        self.i += 1;
        match word.as_str() {
            "all" if self.eat(&Tok::LParen) => {
                self.expect(&Tok::RParen)?;
                return Ok(Expr::All);
            }
            "has" if self.eat(&Tok::LParen) => {
                let Some(Tok::Word(key)) = self.peek().cloned() else {
                    return Err("has() without a label".into());
                };
                self.i += 1;
                self.expect(&Tok::RParen)?;
                return Ok(Expr::Has(key));
            }
            _ => {}
        }
        let key = word;
        match self.peek().cloned() {
            Some(Tok::EqEq) => {
                self.i += 1;
                Ok(Expr::Eq(key, self.string()?))
            }
            Some(Tok::NotEq) => {
                self.i += 1;
                Ok(Expr::Ne(key, self.string()?))
            }
            Some(Tok::Word(w)) if w == "in" => {
                self.i += 1;
                Ok(Expr::In(key, self.set()?))
            }
            Some(Tok::Word(w)) if w == "not" => {
                self.i += 1;
                match self.peek() {
                    Some(Tok::Word(w)) if w == "in" => {
                        self.i += 1;
                        Ok(Expr::NotIn(key, self.set()?))
                    }
                    other => Err(format!("cannot evaluate `not` before {other:?}")),
                }
            }
            other => Err(format!("cannot evaluate {key:?} followed by {other:?}")),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        match self.peek().cloned() {
            Some(Tok::Str(s)) => {
                self.i += 1;
                Ok(s)
            }
            other => Err(format!("expected a quoted value, found {other:?}")),
        }
    }

    fn set(&mut self) -> Result<Vec<String>, String> {
        self.expect(&Tok::LBrace)?;
        let mut out = Vec::new();
        if self.eat(&Tok::RBrace) {
            return Ok(out);
        }
        loop {
            out.push(self.string()?);
            if self.eat(&Tok::RBrace) {
                return Ok(out);
            }
            self.expect(&Tok::Comma)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn the_documented_operators_select_as_calico_says() {
        let l = labels(&[
            ("role", "database"),
            ("projectcalico.org/namespace", "prod"),
        ]);
        for (text, want) in [
            ("", true),
            ("all()", true),
            ("role == 'database'", true),
            ("role == \"frontend\"", false),
            ("role != 'frontend'", true),
            ("tier != 'x'", true),
            ("has(role)", true),
            ("!has(role)", false),
            ("!has(tier)", true),
            ("role in {'a', 'database'}", true),
            ("role not in {'database'}", false),
            ("tier not in {'a'}", true),
            ("role == 'database' && has(tier)", false),
            ("role == 'x' || has(role)", true),
            ("!(role == 'x' || tier == 'y')", true),
            (
                "projectcalico.org/namespace not in {'kube-system', 'calico-system'}",
                true,
            ),
        ] {
            assert_eq!(Expr::parse(text).expect(text).matches(&l), want, "{text}");
        }
    }

    #[test]
    fn what_it_cannot_read_is_refused_not_guessed() {
        for text in [
            "global()",
            "role contains 'data'",
            "role starts with 'd'",
            "role ends with 'e'",
            "role == database",
            "role in {'a'",
            "(role == 'a'",
            "role ~ 'a'",
        ] {
            assert!(Expr::parse(text).is_err(), "{text}");
        }
    }
}
