//! Calico's selector expressions, the subset prober reads: `k == 'v'`, `k != 'v'`, `has(k)`,
//! `!has(k)`, `k in {'a', 'b'}`, `k not in {...}`, `all()`, `!`, `&&`, `||` and parentheses.
//! Anything else (`global()`, `contains`, `starts with`, `ends with`, ...) is refused with its
//! text, so the policy is "cannot evaluate", never guessed.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::diagnose) enum Expr {
    All,
    Eq(String, String),
    Ne(String, String),
    Has(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Parses `text`; an empty selector is `all()`.
    pub(in crate::diagnose) fn parse(text: &str) -> Result<Self, String> {
        let tokens = lex(text)?;
        if tokens.is_empty() {
            return Ok(Self::All);
        }
        let mut p = Parser { t: &tokens, i: 0 };
        let e = p.or()?;
        if p.i != tokens.len() {
            return Err(format!(
                "selector {text:?}: cannot evaluate from {:?}",
                tokens[p.i]
            ));
        }
        Ok(e)
    }

    pub(in crate::diagnose) fn is_all(&self) -> bool {
        matches!(self, Self::All)
    }

    pub(in crate::diagnose) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::All => true,
            Self::Eq(k, v) => labels.get(k) == Some(v),
            Self::Ne(k, v) => labels.get(k) != Some(v),
            Self::Has(k) => labels.contains_key(k),
            Self::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Self::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Self::Not(e) => !e.matches(labels),
            Self::And(a, b) => a.matches(labels) && b.matches(labels),
            Self::Or(a, b) => a.matches(labels) || b.matches(labels),
        }
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
                    .ok_or_else(|| format!("selector {text:?}: unterminated string"))?;
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
                return Err(format!(
                    "selector {text:?}: cannot evaluate the character {other:?}"
                ));
            }
        }
    }
    Ok(out)
}

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
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
            Err(format!(
                "selector: expected {tok:?}, found {:?}",
                self.peek()
            ))
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while self.eat(&Tok::OrOr) {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        while self.eat(&Tok::AndAnd) {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat(&Tok::Bang) {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat(&Tok::LParen) {
            let e = self.or()?;
            self.expect(&Tok::RParen)?;
            return Ok(e);
        }
        let Some(Tok::Word(word)) = self.peek().cloned() else {
            return Err(format!("selector: cannot evaluate from {:?}", self.peek()));
        };
        self.i += 1;
        match word.as_str() {
            "all" if self.eat(&Tok::LParen) => {
                self.expect(&Tok::RParen)?;
                return Ok(Expr::All);
            }
            "has" if self.eat(&Tok::LParen) => {
                let Some(Tok::Word(key)) = self.peek().cloned() else {
                    return Err("selector: has() without a label".into());
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
                    other => Err(format!("selector: cannot evaluate `not` before {other:?}")),
                }
            }
            other => Err(format!(
                "selector: cannot evaluate {key:?} followed by {other:?}"
            )),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        match self.peek().cloned() {
            Some(Tok::Str(s)) => {
                self.i += 1;
                Ok(s)
            }
            other => Err(format!(
                "selector: expected a quoted value, found {other:?}"
            )),
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
