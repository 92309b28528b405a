//! Integration suites.
mod engine;
mod llm_fixtures;
