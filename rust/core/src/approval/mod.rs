//! Approval (SPEC §5): every committed tool call passes one decision from an [`Approver`].
//!
//! The engine calls approvers strictly one at a time. An approver that fails (returns
//! [`ApprovalError`]) counts as a deny; no approver at all denies everything. [`policy`] holds
//! the approval modes and composable rules, built as data and evaluated here in the core.

pub mod policy;

use async_trait::async_trait;

pub use crate::protocol::Decision;
use crate::protocol::OmniMessage;
pub use policy::{
    ApprovalMode, MatchKind, Matcher, Policy, PolicyApprover, PolicyError, ToolPermissions,
};

/// Why an approver could not decide.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("approval callback failed: {message}")]
pub struct ApprovalError {
    /// What went wrong (e.g. the Python exception, or the unexpected return value).
    pub message: String,
}

impl ApprovalError {
    /// Builds an error from any message.
    pub fn new(message: impl Into<String>) -> Self {
        ApprovalError {
            message: message.into(),
        }
    }
}

/// Decides on one complete `tool_call` message (origin-tagged for a subagent's calls).
#[async_trait]
pub trait Approver: Send + Sync {
    /// Returns the decision for `tool_call`.
    async fn approve(&self, tool_call: &OmniMessage) -> Result<Decision, ApprovalError>;
}

/// Approves with a fixed decision (`allow-all` / `deny-all`).
#[derive(Debug, Clone, Copy)]
pub struct FixedApprover(pub Decision);

#[async_trait]
impl Approver for FixedApprover {
    async fn approve(&self, _tool_call: &OmniMessage) -> Result<Decision, ApprovalError> {
        Ok(self.0)
    }
}
