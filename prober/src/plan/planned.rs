//! The planned matrix held compactly: per probe a 16-byte key and an 8-byte row, its names and
//! probe stored once however many rows share them (a TCP probe to one address and port is the
//! same probe from every sender). Read through [`PlannedRef`] views; the run hands the names and
//! keys on to the results.

use probe_proto::{Port, Probe, ProbeResult};

use super::PlannedProbe;
use crate::model::{
    AgentRef, Id, Interner, Key, Names, PathClass, ResultRecord, Target, Unknown, Viewed, Views,
};

/// One planned probe besides its key: its interned probe and its receipt witness.
#[derive(Debug, Clone, Copy)]
struct Row {
    probe: u32,
    receipt_port: Option<Port>,
}

/// The planned probes, in plan order.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    names: Names,
    keys: Vec<Key>,
    probes: Interner<Probe>,
    rows: Vec<Row>,
}

/// One planned probe, borrowed from [`Planned`]: the fields of a [`PlannedProbe`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlannedRef<'a> {
    pub id: Id<'a>,
    pub path: PathClass,
    pub from: &'a AgentRef,
    pub to: &'a Target,
    pub probe: &'a Probe,
    pub receipt_port: Option<Port>,
}

impl PlannedRef<'_> {
    /// The record of this probe with `result` (tests, fixtures, and reports built from a plan).
    #[must_use]
    pub fn record(&self, unknown: Option<Unknown>, result: ProbeResult) -> ResultRecord {
        ResultRecord {
            path: self.path,
            from: self.from.clone(),
            to: self.to.clone(),
            unknown,
            result,
        }
    }

    #[must_use]
    pub fn to_owned(&self) -> PlannedProbe {
        PlannedProbe {
            id: self.id.to_string(),
            path: self.path,
            from: self.from.clone(),
            to: self.to.clone(),
            probe: self.probe.clone(),
            receipt_port: self.receipt_port,
        }
    }
}

impl Planned {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one probe at the end; returns its index.
    pub fn push(&mut self, p: PlannedProbe) -> usize {
        self.keys.push(self.names.key(p.path, p.from, p.to, &p.id));
        self.rows.push(Row {
            probe: self.probes.intern(p.probe),
            receipt_port: p.receipt_port,
        });
        self.rows.len() - 1
    }

    /// Gives back the room the rows grew into (up to half of it).
    pub fn shrink_to_fit(&mut self) {
        self.keys.shrink_to_fit();
        self.rows.shrink_to_fit();
    }

    pub(crate) fn set_receipt_port(&mut self, i: usize, port: Option<Port>) {
        if let Some(row) = self.rows.get_mut(i) {
            row.receipt_port = port;
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The probe at `i`; panics past the end, as indexing does.
    #[must_use]
    pub fn at(&self, i: usize) -> PlannedRef<'_> {
        self.view(i)
    }

    #[must_use]
    pub fn get(&self, i: usize) -> Option<PlannedRef<'_>> {
        (i < self.len()).then(|| self.view(i))
    }

    #[must_use]
    pub fn iter(&self) -> Iter<'_> {
        Views::new(self, self.len())
    }

    /// The probes as owned values (tests, and small plans).
    #[must_use]
    pub fn to_vec(&self) -> Vec<PlannedProbe> {
        self.iter().map(|p| p.to_owned()).collect()
    }

    pub(crate) fn key(&self, i: usize) -> Key {
        self.keys[i]
    }

    /// The agents that send probes, each once, in name order.
    #[must_use]
    pub fn senders(&self) -> Vec<AgentRef> {
        self.names.senders()
    }

    /// Each agent's place in name order, by its interned index.
    pub(crate) fn agent_ranks(&self) -> Vec<u32> {
        self.names.agent_ranks()
    }

    /// The names and the keys, for the results of this plan.
    pub(crate) fn into_names(self) -> (Names, Vec<Key>) {
        (self.names, self.keys)
    }

    /// The plan's indices in the order [`Planned::find`] searches.
    pub(crate) fn lookup_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..u32::try_from(self.len()).unwrap_or(u32::MAX)).collect();
        order.sort_unstable_by_key(|&i| Names::order(&self.keys[i as usize]));
        order
    }

    /// The index of the planned probe with this id, searching `order` ([`Planned::lookup_order`]).
    pub(crate) fn find(&self, order: &[u32], id: &str) -> Option<usize> {
        self.names.lookup(id).into_iter().find_map(|want| {
            let k = order
                .binary_search_by_key(&want, |&i| Names::order(&self.keys[i as usize]))
                .ok()?;
            Some(order[k] as usize)
        })
    }
}

/// The planned probes in order, as views.
pub type Iter<'a> = Views<'a, Planned>;

impl Viewed for Planned {
    type View<'a> = PlannedRef<'a>;
    fn view(&self, i: usize) -> PlannedRef<'_> {
        let (row, key) = (&self.rows[i], &self.keys[i]);
        PlannedRef {
            id: self.names.id(key),
            path: key.path(),
            from: self.names.from(key),
            to: self.names.to(key),
            probe: self.probes.get(row.probe),
            receipt_port: row.receipt_port,
        }
    }
}

impl<'a> IntoIterator for &'a Planned {
    type Item = PlannedRef<'a>;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<PlannedProbe> for Planned {
    fn from_iter<I: IntoIterator<Item = PlannedProbe>>(iter: I) -> Self {
        let mut out = Self::new();
        for p in iter {
            out.push(p);
        }
        out
    }
}

impl From<Vec<PlannedProbe>> for Planned {
    fn from(v: Vec<PlannedProbe>) -> Self {
        v.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Filter, plan};
    use crate::testutil::inventory;

    #[test]
    fn every_probe_is_found_by_its_id_and_reads_back_whole() {
        let planned = plan(&inventory(4, 1, "flannel"), &Filter::default());
        let owned = planned.to_vec();
        let mut extra = owned[0].clone();
        extra.id = "not the planner's form".into();
        let mut all = owned.clone();
        all.push(extra);
        let planned = Planned::from(all.clone());
        assert_eq!(planned.to_vec(), all);
        let order = planned.lookup_order();
        for (i, p) in all.iter().enumerate() {
            assert_eq!(planned.find(&order, &p.id), Some(i), "{}", p.id);
        }
        assert_eq!(
            planned.find(&order, "pod-to-pod:n9/pod->n1/pod:tcp/9917"),
            None
        );
        // A node name holding "->" is still found.
        let mut odd = owned[0].clone();
        odd.from.node = "a->b".into();
        odd.id = format!("{}:{}->x->y", odd.path, odd.from);
        let odd_plan = Planned::from(vec![owned[0].clone(), odd.clone()]);
        let odd_order = odd_plan.lookup_order();
        assert_eq!(odd_plan.find(&odd_order, &odd.id), Some(1));
        assert_eq!(odd_plan.at(1).id.to_string(), odd.id);
        assert_eq!(planned.find(&order, ""), None);
        // A TCP probe to one address and port is one probe, whoever sends it.
        assert!(
            planned.probes.len() < planned.len() / 2,
            "{}",
            planned.probes.len()
        );
    }
}
