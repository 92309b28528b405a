//! Approval policies (SPEC §5): the four modes and small composable rules, as data.
//!
//! A [`Policy`] is a tree evaluated against one complete `tool_call` message. Leaves either
//! decide ([`Policy::Decide`]) or defer to an [`Approver`] ([`Policy::Ask`], e.g. a person at
//! a prompt or a Python callable); [`Policy::When`] applies its inner policy only when a
//! [`Matcher`] matches the call and otherwise *abstains*; [`Policy::FirstMatch`] returns the
//! first inner verdict that is not an abstention. The four modes are built from these parts
//! ([`ApprovalMode::policy`]), so a CLI flag, a web setting and a Python script all approve
//! through the same code.
//!
//! Matchers that depend on a tool's permission (`r` / `rw`) look it up through
//! [`ToolPermissions`], which the session provides; unknown tools have no permission and never
//! match a permission rule (so `read-only` asks for them). A policy that abstains as a whole
//! denies: [`PolicyApprover`] is the [`Approver`] the engine sees.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use regex::Regex;

use super::{ApprovalError, Approver};
use crate::config::Permission;
use crate::protocol::{Decision, OmniMessage};

/// Longest regex source accepted for an argument rule, in bytes; rules are written by people,
/// and the bound keeps a pasted blob from compiling into a huge automaton.
pub const MAX_PATTERN_LEN: usize = 4_096;
/// Compiled size limit of one rule's regex, in bytes (the `regex` crate's own default is 10 MiB;
/// a command rule needs far less).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Errors building a policy.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// A rule's regular expression does not compile.
    #[error("invalid pattern {pattern:?} for {tool}.{field}: {message}")]
    BadPattern {
        /// The tool the rule is for.
        tool: String,
        /// The argument the rule reads.
        field: String,
        /// The pattern as given.
        pattern: String,
        /// The regex compiler's message.
        message: String,
    },
    /// An approval mode name that is not one of the four.
    #[error(
        "unknown approval mode \"{0}\" (expected allow-all, deny-all, read-only or always-ask)"
    )]
    UnknownMode(String),
    /// `read-only` and `always-ask` defer to someone, and nobody was given.
    #[error("approval mode {0} needs an `ask` callback to decide what it defers to a person")]
    AskRequired(&'static str),
    /// A permission name that is not `r` or `rw`.
    #[error("unknown permission \"{0}\" (expected r or rw)")]
    UnknownPermission(String),
}

/// The four approval modes of SPEC §5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ApprovalMode {
    /// Allow every call (the CLI default).
    AllowAll,
    /// Deny every call.
    DenyAll,
    /// Allow tools with permission `r`; ask for the rest, unknown tools included.
    ReadOnly,
    /// Ask for every call.
    AlwaysAsk,
}

impl ApprovalMode {
    /// The spelling used by the CLI and the web settings.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::AllowAll => "allow-all",
            ApprovalMode::DenyAll => "deny-all",
            ApprovalMode::ReadOnly => "read-only",
            ApprovalMode::AlwaysAsk => "always-ask",
        }
    }

    /// Whether the mode defers some calls to `ask`.
    pub fn needs_ask(self) -> bool {
        matches!(self, ApprovalMode::ReadOnly | ApprovalMode::AlwaysAsk)
    }

    /// The mode as a policy. `ask` decides what the mode defers to a person; it is required by
    /// `read-only` and `always-ask` and ignored by the other two.
    pub fn policy<A>(self, ask: Option<A>) -> Result<Policy<A>, PolicyError> {
        Ok(match self {
            ApprovalMode::AllowAll => Policy::Decide(Decision::Allow),
            ApprovalMode::DenyAll => Policy::Decide(Decision::Deny),
            ApprovalMode::ReadOnly => {
                let ask = ask.ok_or(PolicyError::AskRequired(self.as_str()))?;
                Policy::FirstMatch(vec![
                    Policy::when(
                        Matcher::Permission(Permission::Read),
                        Policy::Decide(Decision::Allow),
                    ),
                    Policy::Ask(ask),
                ])
            }
            ApprovalMode::AlwaysAsk => {
                Policy::Ask(ask.ok_or(PolicyError::AskRequired(self.as_str()))?)
            }
        })
    }
}

impl std::str::FromStr for ApprovalMode {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow-all" => Ok(ApprovalMode::AllowAll),
            "deny-all" => Ok(ApprovalMode::DenyAll),
            "read-only" => Ok(ApprovalMode::ReadOnly),
            "always-ask" => Ok(ApprovalMode::AlwaysAsk),
            other => Err(PolicyError::UnknownMode(other.to_owned())),
        }
    }
}

/// Parses a permission name (`r` / `rw`).
pub fn parse_permission(s: &str) -> Result<Permission, PolicyError> {
    match s {
        "r" => Ok(Permission::Read),
        "rw" => Ok(Permission::ReadWrite),
        other => Err(PolicyError::UnknownPermission(other.to_owned())),
    }
}

/// Where a permission rule learns a tool's permission.
pub trait ToolPermissions: Send + Sync {
    /// The tool's permission; `None` for tools the session does not have.
    fn permission(&self, tool: &str) -> Option<Permission>;
}

impl ToolPermissions for HashMap<String, Permission> {
    fn permission(&self, tool: &str) -> Option<Permission> {
        self.get(tool).copied()
    }
}

impl ToolPermissions for crate::environment::Environment {
    fn permission(&self, tool: &str) -> Option<Permission> {
        self.tool_permission(tool)
    }
}

/// How an argument rule's pattern must match the argument's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    /// The pattern must match the whole value (safe default for allow rules: `ls .*` does not
    /// allow `x; ls`).
    Whole,
    /// The pattern may match anywhere in the value (natural for deny rules: `rm -rf`).
    Search,
}

/// A compiled argument pattern, remembering its source for display.
#[derive(Clone, Debug)]
pub struct ArgPattern {
    source: String,
    kind: MatchKind,
    regex: Regex,
}

impl ArgPattern {
    /// The pattern as given.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whole-value or anywhere.
    pub fn kind(&self) -> MatchKind {
        self.kind
    }

    /// Whether `value` matches.
    pub fn is_match(&self, value: &str) -> bool {
        self.regex.is_match(value)
    }
}

/// What a [`Policy::When`] tests about a tool call.
#[derive(Clone, Debug)]
pub enum Matcher {
    /// Every call.
    Any,
    /// Calls of any of these tools.
    Tools(Vec<String>),
    /// Calls of tools with this permission (unknown tools never match).
    Permission(Permission),
    /// Calls of `tool` whose JSON arguments hold a string `field` matching `pattern`. Calls
    /// whose arguments are not a JSON object, or lack the field, or hold a non-string there,
    /// do not match.
    Argument {
        /// The tool name.
        tool: String,
        /// The argument name, e.g. `cmd` of `exec_command`.
        field: String,
        /// The pattern.
        pattern: ArgPattern,
    },
}

impl Matcher {
    /// An argument rule; fails with [`PolicyError::BadPattern`] on a pattern that does not
    /// compile (syntax of the `regex` crate: no look-around, no back-references).
    pub fn argument(
        tool: impl Into<String>,
        field: impl Into<String>,
        pattern: &str,
        kind: MatchKind,
    ) -> Result<Matcher, PolicyError> {
        let tool = tool.into();
        let field = field.into();
        let bad = |message: String| PolicyError::BadPattern {
            tool: tool.clone(),
            field: field.clone(),
            pattern: pattern.to_owned(),
            message,
        };
        if pattern.len() > MAX_PATTERN_LEN {
            return Err(bad(format!(
                "longer than {MAX_PATTERN_LEN} bytes ({} bytes)",
                pattern.len()
            )));
        }
        let anchored = match kind {
            MatchKind::Whole => format!(r"\A(?:{pattern})\z"),
            MatchKind::Search => pattern.to_owned(),
        };
        let regex = regex::RegexBuilder::new(&anchored)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Matcher::Argument {
            tool,
            field,
            pattern: ArgPattern {
                source: pattern.to_owned(),
                kind,
                regex,
            },
        })
    }

    /// Whether the matcher matches `call` (a complete `tool_call`; other messages match only
    /// [`Matcher::Any`]).
    pub fn matches(&self, call: &OmniMessage, permissions: &dyn ToolPermissions) -> bool {
        if let Matcher::Any = self {
            return true;
        }
        let Some(tc) = call.as_tool_call() else {
            return false;
        };
        match self {
            Matcher::Any => true,
            Matcher::Tools(names) => names.contains(&tc.name),
            Matcher::Permission(p) => permissions.permission(&tc.name) == Some(*p),
            Matcher::Argument {
                tool,
                field,
                pattern,
            } => {
                *tool == tc.name
                    && serde_json::from_str::<serde_json::Value>(&tc.arguments)
                        .ok()
                        .as_ref()
                        .and_then(|args| args.get(field.as_str()))
                        .and_then(serde_json::Value::as_str)
                        .is_some_and(|v| pattern.is_match(v))
            }
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Matcher::Any => f.write_str("any"),
            Matcher::Tools(names) => write!(f, "tool in {names:?}"),
            Matcher::Permission(p) => write!(f, "permission {}", p.as_str()),
            Matcher::Argument {
                tool,
                field,
                pattern,
            } => {
                let op = match pattern.kind {
                    MatchKind::Whole => "matches",
                    MatchKind::Search => "contains",
                };
                write!(f, "{tool}.{field} {op} /{}/", pattern.source)
            }
        }
    }
}

/// An approval policy; see the module docs. `A` is what an ask leaf holds: an [`Approver`] for
/// a policy ready to evaluate, or anything an embedder binds to approvers later with
/// [`Policy::map_ask`] (the Python binding keeps Python callables there until a run knows its
/// event loop).
#[derive(Clone)]
pub enum Policy<A = Arc<dyn Approver>> {
    /// Always this decision.
    Decide(Decision),
    /// Whatever the approver says (errors propagate: the engine denies with the reason).
    Ask(A),
    /// The inner policy when the matcher matches; abstains otherwise.
    When(Matcher, Box<Policy<A>>),
    /// The first inner verdict that is not an abstention; abstains when all abstain.
    FirstMatch(Vec<Policy<A>>),
}

impl<A> Policy<A> {
    /// `When(matcher, then)`.
    pub fn when(matcher: Matcher, then: Policy<A>) -> Policy<A> {
        Policy::When(matcher, Box::new(then))
    }

    /// The same tree with every ask leaf converted by `f` (in evaluation order).
    pub fn map_ask<B>(&self, f: &mut impl FnMut(&A) -> B) -> Policy<B> {
        match self {
            Policy::Decide(d) => Policy::Decide(*d),
            Policy::Ask(a) => Policy::Ask(f(a)),
            Policy::When(m, then) => Policy::When(m.clone(), Box::new(then.map_ask(f))),
            Policy::FirstMatch(ps) => Policy::FirstMatch(ps.iter().map(|p| p.map_ask(f)).collect()),
        }
    }
}

impl Policy {
    /// Evaluates the policy: `Ok(None)` is an abstention. Approvers are asked only when the
    /// evaluation reaches them, one at a time.
    pub fn evaluate<'a>(
        &'a self,
        call: &'a OmniMessage,
        permissions: &'a dyn ToolPermissions,
    ) -> BoxFuture<'a, Result<Option<Decision>, ApprovalError>> {
        Box::pin(async move {
            match self {
                Policy::Decide(d) => Ok(Some(*d)),
                Policy::Ask(approver) => approver.approve(call).await.map(Some),
                Policy::When(matcher, then) => {
                    if matcher.matches(call, permissions) {
                        then.evaluate(call, permissions).await
                    } else {
                        Ok(None)
                    }
                }
                Policy::FirstMatch(policies) => {
                    for p in policies {
                        if let Some(d) = p.evaluate(call, permissions).await? {
                            return Ok(Some(d));
                        }
                    }
                    Ok(None)
                }
            }
        })
    }
}

impl<A> fmt::Display for Policy<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Decide(d) => f.write_str(d.as_str()),
            Policy::Ask(_) => f.write_str("ask"),
            Policy::When(m, then) => write!(f, "when({m}, {then})"),
            Policy::FirstMatch(ps) => {
                f.write_str("first_match(")?;
                for (i, p) in ps.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{p}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl<A> fmt::Debug for Policy<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Policy({self})")
    }
}

/// The [`Approver`] of a policy: the policy's verdict, and deny when it abstains.
pub struct PolicyApprover {
    policy: Policy,
    permissions: Arc<dyn ToolPermissions>,
}

impl PolicyApprover {
    /// Binds a policy to a session's tool permissions.
    pub fn new(policy: Policy, permissions: Arc<dyn ToolPermissions>) -> Self {
        PolicyApprover {
            policy,
            permissions,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

#[async_trait]
impl Approver for PolicyApprover {
    async fn approve(&self, tool_call: &OmniMessage) -> Result<Decision, ApprovalError> {
        Ok(self
            .policy
            .evaluate(tool_call, self.permissions.as_ref())
            .await?
            .unwrap_or(Decision::Deny))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::protocol::{StopReason, tool_call};

    /// An approver that answers from a fixed result and records what it was asked.
    struct Recording {
        answer: Result<Decision, ApprovalError>,
        asked: Mutex<Vec<String>>,
    }

    impl Recording {
        fn new(answer: Result<Decision, ApprovalError>) -> Arc<Self> {
            Arc::new(Recording {
                answer,
                asked: Mutex::new(Vec::new()),
            })
        }
        fn asked(&self) -> Vec<String> {
            self.asked.lock().unwrap().clone()
        }
    }

    #[async_trait]
    impl Approver for Recording {
        async fn approve(&self, call: &OmniMessage) -> Result<Decision, ApprovalError> {
            let name = call.as_tool_call().map(|c| c.name.clone()).unwrap();
            self.asked.lock().unwrap().push(name);
            self.answer.clone()
        }
    }

    fn perms() -> HashMap<String, Permission> {
        HashMap::from([
            ("read_image".to_owned(), Permission::Read),
            ("exec_command".to_owned(), Permission::ReadWrite),
        ])
    }

    fn call(name: &str, args: &str) -> OmniMessage {
        tool_call(name, args, "c1", StopReason::Completed)
    }

    async fn decide(policy: &Policy, msg: &OmniMessage) -> Result<Decision, ApprovalError> {
        PolicyApprover::new(policy.clone(), Arc::new(perms()))
            .approve(msg)
            .await
    }

    #[tokio::test]
    async fn modes_by_permission() {
        let read = call("read_image", r#"{"source":"a.png"}"#);
        let write = call("exec_command", r#"{"cmd":"ls"}"#);
        let unknown = call("no_such_tool", "{}");
        // (mode, ask's answer, [expected for read, write, unknown], tools asked)
        let table: Vec<(ApprovalMode, Decision, [Decision; 3], Vec<&str>)> = vec![
            (
                ApprovalMode::AllowAll,
                Decision::Deny,
                [Decision::Allow; 3],
                vec![],
            ),
            (
                ApprovalMode::DenyAll,
                Decision::Allow,
                [Decision::Deny; 3],
                vec![],
            ),
            (
                ApprovalMode::ReadOnly,
                Decision::Deny,
                [Decision::Allow, Decision::Deny, Decision::Deny],
                vec!["exec_command", "no_such_tool"],
            ),
            (
                ApprovalMode::ReadOnly,
                Decision::Allow,
                [Decision::Allow; 3],
                vec!["exec_command", "no_such_tool"],
            ),
            (
                ApprovalMode::AlwaysAsk,
                Decision::Deny,
                [Decision::Deny; 3],
                vec!["read_image", "exec_command", "no_such_tool"],
            ),
        ];
        for (mode, answer, expected, asked) in table {
            let ask = Recording::new(Ok(answer));
            let policy: Policy = mode.policy(Some(ask.clone() as Arc<dyn Approver>)).unwrap();
            let got = [
                decide(&policy, &read).await.unwrap(),
                decide(&policy, &write).await.unwrap(),
                decide(&policy, &unknown).await.unwrap(),
            ];
            assert_eq!(got, expected, "{mode:?} answering {answer:?}");
            assert_eq!(ask.asked(), asked, "{mode:?}");
        }
    }

    #[test]
    fn mode_names_and_ask_requirement() {
        for mode in [
            ApprovalMode::AllowAll,
            ApprovalMode::DenyAll,
            ApprovalMode::ReadOnly,
            ApprovalMode::AlwaysAsk,
        ] {
            assert_eq!(mode.as_str().parse::<ApprovalMode>(), Ok(mode));
            assert_eq!(mode.policy::<()>(None).is_err(), mode.needs_ask());
        }
        assert_eq!(
            "yolo".parse::<ApprovalMode>(),
            Err(PolicyError::UnknownMode("yolo".into()))
        );
        assert_eq!(
            ApprovalMode::ReadOnly.policy::<()>(None).err().map(|e| e.to_string()),
            Some(
                "approval mode read-only needs an `ask` callback to decide what it defers to a person"
                    .into()
            )
        );
        assert_eq!(parse_permission("r"), Ok(Permission::Read));
        assert_eq!(parse_permission("rw"), Ok(Permission::ReadWrite));
        assert_eq!(
            parse_permission("x"),
            Err(PolicyError::UnknownPermission("x".into()))
        );
    }

    #[test]
    fn argument_matching() {
        let whole =
            Matcher::argument("exec_command", "cmd", r"ls( -la)?", MatchKind::Whole).unwrap();
        let search =
            Matcher::argument("exec_command", "cmd", r"rm\s+-rf", MatchKind::Search).unwrap();
        let p = perms();
        // (matcher, tool, arguments, expected)
        let table = [
            (&whole, "exec_command", r#"{"cmd":"ls"}"#, true),
            (&whole, "exec_command", r#"{"cmd":"ls -la"}"#, true),
            (&whole, "exec_command", r#"{"cmd":"ls; rm x"}"#, false),
            (&whole, "exec_command", r#"{"cmd":"x\nls"}"#, false),
            (&whole, "input_command", r#"{"cmd":"ls"}"#, false),
            (&whole, "exec_command", r#"{"cmd":7}"#, false),
            (&whole, "exec_command", r#"{"workdir":"ls"}"#, false),
            (&whole, "exec_command", "not json", false),
            (&whole, "exec_command", r#"["ls"]"#, false),
            (
                &search,
                "exec_command",
                r#"{"cmd":"cd / && rm  -rf x"}"#,
                true,
            ),
            (&search, "exec_command", r#"{"cmd":"rm -r x"}"#, false),
        ];
        for (m, tool, args, expected) in table {
            assert_eq!(m.matches(&call(tool, args), &p), expected, "{m} on {args}");
        }
        let not_a_call = crate::protocol::user_text("ls");
        assert!(!whole.matches(&not_a_call, &p));
        assert!(Matcher::Any.matches(&not_a_call, &p));
        assert!(
            Matcher::Tools(vec!["a".into(), "exec_command".into()])
                .matches(&call("exec_command", "{}"), &p)
        );
        assert!(!Matcher::Permission(Permission::Read).matches(&call("unknown", "{}"), &p));
    }

    #[test]
    fn bad_patterns_are_errors_that_name_the_rule() {
        let err = Matcher::argument("exec_command", "cmd", "(unclosed", MatchKind::Whole)
            .err()
            .unwrap();
        let PolicyError::BadPattern {
            tool,
            field,
            pattern,
            ..
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(
            (tool.as_str(), field.as_str(), pattern.as_str()),
            ("exec_command", "cmd", "(unclosed")
        );
        assert!(
            err.to_string()
                .starts_with(r#"invalid pattern "(unclosed" for exec_command.cmd: "#)
        );
        let long = "a".repeat(MAX_PATTERN_LEN + 1);
        assert!(Matcher::argument("t", "f", &long, MatchKind::Search).is_err());
    }

    #[tokio::test]
    async fn first_match_wins_and_abstention_denies() {
        let ask = Recording::new(Ok(Decision::Allow));
        let policy: Policy = Policy::FirstMatch(vec![
            Policy::when(
                Matcher::argument("exec_command", "cmd", "rm", MatchKind::Search).unwrap(),
                Policy::Decide(Decision::Forbidden),
            ),
            Policy::when(
                Matcher::argument("exec_command", "cmd", r"ls.*", MatchKind::Whole).unwrap(),
                Policy::Decide(Decision::Allow),
            ),
            Policy::when(
                Matcher::Tools(vec!["input_command".into()]),
                Policy::Ask(ask.clone()),
            ),
        ]);
        let table = [
            (
                call("exec_command", r#"{"cmd":"ls && rm x"}"#),
                Decision::Forbidden,
            ),
            (call("exec_command", r#"{"cmd":"ls -la"}"#), Decision::Allow),
            (call("exec_command", r#"{"cmd":"cat x"}"#), Decision::Deny),
            (call("input_command", r#"{"chars":"y"}"#), Decision::Allow),
        ];
        for (msg, expected) in &table {
            assert_eq!(decide(&policy, msg).await, Ok(*expected), "{msg:?}");
        }
        assert_eq!(ask.asked(), vec!["input_command"]);
        assert_eq!(
            policy.to_string(),
            r#"first_match(when(exec_command.cmd contains /rm/, forbidden), when(exec_command.cmd matches /ls.*/, allow), when(tool in ["input_command"], ask))"#
        );
    }

    #[tokio::test]
    async fn map_ask_binds_leaves_in_order() {
        let spec: Policy<&str> = Policy::FirstMatch(vec![
            Policy::when(
                Matcher::Tools(vec!["exec_command".into()]),
                Policy::Ask("a"),
            ),
            ApprovalMode::ReadOnly.policy(Some("b")).unwrap(),
        ]);
        let mut seen = Vec::new();
        let ask = Recording::new(Ok(Decision::Forbidden));
        let bound = spec.map_ask(&mut |name: &&str| {
            seen.push(name.to_string());
            ask.clone() as Arc<dyn Approver>
        });
        assert_eq!(seen, ["a", "b"]);
        assert_eq!(spec.to_string(), bound.to_string());
        assert_eq!(
            decide(&bound, &call("read_image", "{}")).await,
            Ok(Decision::Allow)
        );
        assert_eq!(
            decide(&bound, &call("exec_command", "{}")).await,
            Ok(Decision::Forbidden)
        );
    }

    #[tokio::test]
    async fn ask_errors_propagate() {
        let ask = Recording::new(Err(ApprovalError::new("ValueError: no")));
        let policy: Policy = ApprovalMode::AlwaysAsk
            .policy(Some(ask as Arc<dyn Approver>))
            .unwrap();
        assert_eq!(
            decide(&policy, &call("exec_command", "{}")).await,
            Err(ApprovalError::new("ValueError: no"))
        );
    }
}
