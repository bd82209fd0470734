//! The agents, targets and ids a plan and its results share, each stored once, and the key by
//! which a row points into them.

use super::Interner;
use super::id::{Id, id_tail};
use crate::model::{AgentRef, PathClass, Target};

/// The names a run's plan and results share, each stored once: agents, targets, and strings (ids
/// and details).
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub(super) agents: Interner<AgentRef>,
    pub(super) targets: Interner<Target>,
    pub(super) strings: Interner<Box<str>>,
}

/// Where one probe goes, by index into [`Names`]: what a plan row and a result row share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    from: u32,
    to: u32,
    /// The id, or with `prefixed` only what follows `{path}:{from}->` (the planner's ids).
    id: u32,
    path: PathClass,
    prefixed: bool,
}

impl Key {
    pub(crate) fn path(&self) -> PathClass {
        self.path
    }

    /// The sending agent's interned index.
    pub(crate) fn sender(&self) -> u32 {
        self.from
    }
}

impl Names {
    /// The key of a probe from `from` to `to` with this id, its names stored now if new.
    pub(crate) fn key(&mut self, path: PathClass, from: AgentRef, to: Target, id: &str) -> Key {
        let tail = id_tail(id, path, &from);
        let text = tail.unwrap_or(id);
        Key {
            id: self.strings.intern_with(text, || text.into()),
            from: self.agents.intern(from),
            to: self.targets.intern(to),
            path,
            prefixed: tail.is_some(),
        }
    }

    /// The interned agents (the senders), each once, in name order.
    pub(crate) fn senders(&self) -> Vec<AgentRef> {
        let mut all = self.agents.items.clone();
        all.sort_unstable();
        all
    }

    /// Each agent's place in name order, by its interned index.
    pub(crate) fn agent_ranks(&self) -> Vec<u32> {
        let agents = &self.agents.items;
        let mut by_name: Vec<u32> = (0..u32::try_from(agents.len()).unwrap_or(u32::MAX)).collect();
        by_name.sort_unstable_by(|&a, &b| agents[a as usize].cmp(&agents[b as usize]));
        let mut rank = vec![0; agents.len()];
        for (r, &a) in (0u32..).zip(&by_name) {
            rank[a as usize] = r;
        }
        rank
    }

    pub(crate) fn from(&self, k: &Key) -> &AgentRef {
        self.agents.get(k.from)
    }

    pub(crate) fn to(&self, k: &Key) -> &Target {
        self.targets.get(k.to)
    }

    pub(crate) fn id(&self, k: &Key) -> Id<'_> {
        Id {
            prefix: k.prefixed.then(|| (k.path, self.agents.get(k.from))),
            tail: self.strings.get(k.id),
        }
    }

    /// A key's place in [`Names::lookup`] order: agent, path and id tail, or the whole id.
    pub(crate) fn order(k: &Key) -> (u32, u8, u32) {
        if k.prefixed {
            (k.from, k.path as u8, k.id)
        } else {
            (u32::MAX, 0, k.id)
        }
    }

    /// Where the id `id` falls in [`Names::order`], if its names are known at all (an answer's id
    /// found without writing out every planned id).
    pub(crate) fn lookup(&self, id: &str) -> Vec<(u32, u8, u32)> {
        let mut out = Vec::with_capacity(2);
        if let Some((path, rest)) = id.split_once(':')
            && let Some(path) = PathClass::parse(path)
        {
            // A node name from an inventory file may itself hold "->": every split is tried.
            for (at, _) in rest.match_indices("->") {
                let (from, tail) = (&rest[..at], &rest[at + 2..]);
                if let Some((node, agent)) = from.rsplit_once('/')
                    && let Some(agent) = crate::model::AgentKind::parse(agent)
                    && let Some(from) = self.agents.find(&AgentRef {
                        node: node.to_string(),
                        agent,
                    })
                    && let Some(tail) = self.strings.find(tail)
                {
                    out.push((from, path as u8, tail));
                }
            }
        }
        if let Some(whole) = self.strings.find(id) {
            out.push((u32::MAX, 0, whole));
        }
        out
    }
}
