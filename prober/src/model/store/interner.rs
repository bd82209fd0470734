//! Each distinct value stored once, found again by hash.

use std::hash::{BuildHasher, Hash, RandomState};

use hashbrown::HashTable;

/// Each distinct value once; everything else refers to it by its index.
#[derive(Debug, Clone)]
pub(crate) struct Interner<T> {
    pub(super) items: Vec<T>,
    table: HashTable<u32>,
    hasher: RandomState,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            table: HashTable::new(),
            hasher: RandomState::new(),
        }
    }
}

impl<T: Hash + Eq> Interner<T> {
    /// The index of `v`, stored now if it is new.
    pub(crate) fn intern(&mut self, v: T) -> u32 {
        let hash = self.hasher.hash_one(&v);
        let items = &self.items;
        if let Some(&i) = self.table.find(hash, |&i| items[i as usize] == v) {
            return i;
        }
        self.insert(hash, v)
    }

    /// The index of the value equal to `key`, made by `make` only if it is new.
    pub(crate) fn intern_with<Q>(&mut self, key: &Q, make: impl FnOnce() -> T) -> u32
    where
        Q: Hash + Eq + ?Sized,
        T: std::borrow::Borrow<Q>,
    {
        let hash = self.hasher.hash_one(key);
        let items = &self.items;
        if let Some(&i) = self
            .table
            .find(hash, |&i| items[i as usize].borrow() == key)
        {
            return i;
        }
        self.insert(hash, make())
    }

    fn insert(&mut self, hash: u64, v: T) -> u32 {
        let i = u32::try_from(self.items.len()).expect("fewer than 2^32 distinct values");
        self.items.push(v);
        let (items, hasher) = (&self.items, &self.hasher);
        self.table
            .insert_unique(hash, i, |&j| hasher.hash_one(&items[j as usize]));
        i
    }
}

impl<T: Hash + Eq> Interner<T> {
    /// The index of the value equal to `key`, if there is one.
    pub(crate) fn find<Q>(&self, key: &Q) -> Option<u32>
    where
        Q: Hash + Eq + ?Sized,
        T: std::borrow::Borrow<Q>,
    {
        let hash = self.hasher.hash_one(key);
        self.table
            .find(hash, |&i| self.items[i as usize].borrow() == key)
            .copied()
    }
}

impl<T> Interner<T> {
    pub(crate) fn get(&self, i: u32) -> &T {
        &self.items[i as usize]
    }

    /// How many distinct values it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}
