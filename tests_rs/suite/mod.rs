//! Integration suites.
mod engine;
