//! Integration suites.
mod engine;
mod exec;
mod images;
mod llm_anthropic;
mod llm_failures;
mod llm_fixtures;
mod llm_openai;
mod resume;
mod subagent;
mod vision;
