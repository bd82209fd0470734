//! The bottom layer: the data every other layer speaks — path classes, agents, targets, results
//! and their known/unknown state, protocols, directions, and how times are written.

mod agent;
mod family;
mod path;
pub mod read;
mod result;
mod store;
pub mod time;

pub use agent::{AgentKind, AgentRef, AgentStatus};
pub use family::Family;
pub use path::{Direction, PathClass, Protocol};
pub use result::{ResultRecord, Target, Unknown};
pub use store::{Id, Names, Record, ResultView, Results, Viewed, Views};
pub(crate) use store::{Interner, Key};
