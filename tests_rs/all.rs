//! The single integration test binary.
mod suite;
