//! Integration suites.
mod exec;
