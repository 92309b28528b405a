//! Integration suites.
