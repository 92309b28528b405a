//! Integration suites.
mod exec;
mod llm_anthropic;
mod llm_failures;
mod llm_fixtures;
mod llm_openai;
