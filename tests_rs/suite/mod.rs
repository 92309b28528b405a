//! Integration suites.
mod llm_fixtures;
