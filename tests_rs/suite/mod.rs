//! Integration suites.

mod images;
