//! A result's id, borrowed: compared and written without storing the planner's prefix.

use std::fmt;

use serde::Serialize;

use crate::model::{AgentRef, PathClass};

/// What follows `{path}:{from}->` in `id`, when it starts so.
pub(super) fn id_tail<'a>(id: &'a str, path: PathClass, from: &AgentRef) -> Option<&'a str> {
    id.strip_prefix(path.as_str())?
        .strip_prefix(':')?
        .strip_prefix(from.node.as_str())?
        .strip_prefix('/')?
        .strip_prefix(from.agent.as_str())?
        .strip_prefix("->")
}

/// A result's id, borrowed: the planner's `{path}:{from}->` prefix is not stored per result.
#[derive(Debug, Clone, Copy)]
pub struct Id<'a> {
    pub(super) prefix: Option<(PathClass, &'a AgentRef)>,
    pub(super) tail: &'a str,
}

impl<'a> Id<'a> {
    /// The id's text in pieces, written out nowhere.
    pub fn parts(&self) -> impl Iterator<Item = &'a str> {
        let prefix = self.prefix.map(|(path, from)| {
            [
                path.as_str(),
                ":",
                from.node.as_str(),
                "/",
                from.agent.as_str(),
                "->",
            ]
        });
        prefix
            .into_iter()
            .flatten()
            .chain(std::iter::once(self.tail))
    }

    /// The id as text: borrowed when it was stored whole.
    #[must_use]
    pub fn text(&self) -> std::borrow::Cow<'a, str> {
        match self.prefix {
            Some(_) => self.to_string().into(),
            None => self.tail.into(),
        }
    }

    /// Whether this is the id `s`, without writing it out.
    #[must_use]
    pub fn is(&self, s: &str) -> bool {
        match self.prefix {
            Some((path, from)) => id_tail(s, path, from) == Some(self.tail),
            None => self.tail == s,
        }
    }
}

impl fmt::Display for Id<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((path, from)) = self.prefix {
            write!(f, "{path}:{from}->")?;
        }
        f.write_str(self.tail)
    }
}

impl PartialEq for Id<'_> {
    fn eq(&self, other: &Self) -> bool {
        match other.prefix {
            None => self.is(other.tail),
            Some(_) => self
                .parts()
                .flat_map(str::bytes)
                .eq(other.parts().flat_map(str::bytes)),
        }
    }
}

impl PartialEq<str> for Id<'_> {
    fn eq(&self, other: &str) -> bool {
        self.is(other)
    }
}

impl PartialEq<&str> for Id<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

impl Serialize for Id<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
