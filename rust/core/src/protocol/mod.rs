//! The OmniMessage protocol (SPEC §1): serde-only types, builders, guards and the partial
//! aggregator. This module depends on serde and chrono only, so it can become its own crate.

pub mod aggregator;
pub mod builders;
pub mod message;

#[cfg(test)]
mod tests;

pub use aggregator::PartialAggregator;
pub use builders::*;
pub use message::*;
