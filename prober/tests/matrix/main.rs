//! `prober matrix` end to end against labs, one test binary by area: a healthy lab is all `ok`,
//! the flannel-8472 incident fails exactly the paths that cross the firewalled node's VXLAN port,
//! missing agents make their paths unknown (`runs`); a run interrupted at any moment claims only
//! what settled (`interrupt`); bad inventories, tokens and oversized matrices are refused or kept
//! out of every output (`input`); the lab per test and the report schema (`kit`).

// A test: it reads fixtures and the clock freely (clippy.toml bans them in shipped code).
#![allow(clippy::disallowed_methods)]

#[path = "../common/mod.rs"]
mod common;

mod input;
mod interrupt;
mod kit;
mod runs;
