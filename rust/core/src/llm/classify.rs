//! The outcome taxonomy of SPEC §6: how a failed request becomes an [`LlmOutcome`].
//!
//! Every failure a client meets ends up here: an HTTP error status with its body, a transport
//! error, an in-band error object inside the stream (OpenAI `{"error": ...}` chunks, Anthropic
//! `error` events). The result says whether the engine may retry (`timeout`, `malformed`,
//! non-permanent `failed`), must stop (`auth`, permanent `failed`), and carries a precise
//! message. [`redact`] removes the API key from any message before it leaves a client.

use serde_json::Value;

use super::LlmOutcome;
use crate::protocol::StopReason;

/// Longest provider message kept in an error (chars). Error bodies can be whole HTML pages
/// from a proxy; the first part says what went wrong.
pub const MAX_PROVIDER_MESSAGE_CHARS: usize = 1_000;

/// Provider codes/types that mean "your credentials are not accepted".
const AUTH_CODES: &[&str] = &[
    "invalid_api_key",
    "authentication_error",
    "unauthorized",
    "permission_error",
    "invalid_authentication",
];

/// Provider codes/types that mean "try again later".
const RETRYABLE_CODES: &[&str] = &[
    "overloaded_error",
    "rate_limit_error",
    "rate_limit_exceeded",
    "api_error",
    "server_error",
    "internal_server_error",
    "service_unavailable",
    "timeout",
    "timeout_error",
    "request_timeout",
];

/// Provider codes that describe a failed generation rather than a bad request: a new sample
/// may succeed, so such errors are not permanent even when they carry a 4xx status.
const GENERATION_CODES: &[&str] = &["tool_use_failed"];

/// Words in an error text that point to a transient network or capacity problem.
const TRANSIENT_WORDS: &[&str] = &[
    "timeout",
    "timed out",
    "network",
    "connection",
    "overloaded",
    "temporarily",
    "unavailable",
    "rate limit",
];

/// The relevant fields of a provider error object, wherever it was found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderError {
    /// HTTP status, from the response or from the object (`status_code`, numeric `code`).
    pub status: Option<u16>,
    /// `error.type` (Anthropic, OpenAI).
    pub kind: Option<String>,
    /// `error.code` when it is a string.
    pub code: Option<String>,
    /// `error.message`.
    pub message: Option<String>,
}

impl ProviderError {
    /// Reads the `error` member of a chunk or event (`{"error": {...}}`, `{"error": "..."}`).
    /// Returns `None` when there is no such member or it is `null`.
    pub fn from_value(value: &Value) -> Option<ProviderError> {
        match value.get("error")? {
            Value::Object(map) => Self::from_object(map),
            Value::String(s) => Some(ProviderError {
                message: Some(s.clone()),
                ..Default::default()
            }),
            _ => None,
        }
    }

    /// Reads an error object itself (`{"type", "code", "message", "status_code"}`).
    pub fn from_object(map: &serde_json::Map<String, Value>) -> Option<ProviderError> {
        let text = |k: &str| map.get(k).and_then(Value::as_str).map(str::to_owned);
        let status = map
            .get("status_code")
            .or_else(|| map.get("status"))
            .or_else(|| map.get("code"))
            .and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            })
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| (100..600).contains(n));
        let err = ProviderError {
            status,
            kind: text("type"),
            code: text("code"),
            message: text("message").or_else(|| text("detail")),
        };
        (err != ProviderError::default()).then_some(err)
    }

    /// Reads an HTTP error body: a JSON error object, else the body text itself.
    pub fn from_http_body(status: u16, body: &str) -> ProviderError {
        // `{"error": {...}}` (OpenAI, Anthropic) or a flat object with a message (vLLM's
        // `{"object": "error", "message": ...}`, FastAPI's `{"detail": ...}`).
        let parsed = serde_json::from_str::<Value>(body).ok().and_then(|v| {
            ProviderError::from_value(&v).or_else(|| match &v {
                Value::Object(map) if map.contains_key("message") || map.contains_key("detail") => {
                    Self::from_object(map)
                }
                _ => None,
            })
        });
        let mut err = parsed.unwrap_or_else(|| ProviderError {
            message: Some(body.trim().to_owned()).filter(|m| !m.is_empty()),
            ..Default::default()
        });
        err.status = Some(status);
        err
    }

    fn signals(&self) -> impl Iterator<Item = String> + '_ {
        [self.kind.as_deref(), self.code.as_deref()]
            .into_iter()
            .flatten()
            .map(str::to_ascii_lowercase)
    }

    /// `type`/`code`/message, e.g. `overloaded_error: Overloaded`.
    fn describe(&self) -> String {
        let mut tags: Vec<&str> = Vec::new();
        if let Some(k) = self.kind.as_deref() {
            tags.push(k);
        }
        if let Some(c) = self
            .code
            .as_deref()
            .filter(|c| Some(*c) != self.kind.as_deref())
        {
            tags.push(c);
        }
        let message = self
            .message
            .as_deref()
            .map(|m| truncate_chars(m, MAX_PROVIDER_MESSAGE_CHARS));
        match (tags.is_empty(), message) {
            (true, None) => "no details given".to_owned(),
            (true, Some(m)) => m,
            (false, None) => tags.join("/"),
            (false, Some(m)) => format!("{}: {m}", tags.join("/")),
        }
    }
}

/// Keeps the first `max` chars of `s`, marking the cut.
pub fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Classifies an error object by status and code; `permanent` only for `failed`.
fn classify(err: &ProviderError) -> (StopReason, bool) {
    let is = |set: &[&str]| err.signals().any(|s| set.contains(&s.as_str()));
    if matches!(err.status, Some(401 | 403)) || is(AUTH_CODES) {
        return (StopReason::Auth, false);
    }
    if matches!(err.status, Some(408 | 429)) || err.status.is_some_and(|s| s >= 500) {
        return (StopReason::Timeout, false);
    }
    if is(RETRYABLE_CODES) {
        return (StopReason::Timeout, false);
    }
    if is(GENERATION_CODES) {
        return (StopReason::Failed, false);
    }
    if err.status.is_some_and(|s| (400..500).contains(&s)) {
        return (StopReason::Failed, true);
    }
    if err.signals().any(|s| s.contains("invalid_request")) {
        return (StopReason::Failed, true);
    }
    let lower = err.message.as_deref().unwrap_or("").to_ascii_lowercase();
    if TRANSIENT_WORDS.iter().any(|w| lower.contains(w)) {
        return (StopReason::Timeout, false);
    }
    (StopReason::Failed, false)
}

/// An HTTP error response: `HTTP <status>: <provider message>`.
pub fn http_status(status: u16, body: &str) -> LlmOutcome {
    let err = ProviderError::from_http_body(status, body);
    let (status_kind, permanent) = classify(&err);
    let mut outcome = LlmOutcome::error(status_kind, format!("HTTP {status}: {}", err.describe()));
    outcome.permanent = permanent;
    outcome
}

/// An error object inside an otherwise successful stream.
pub fn in_band(err: &ProviderError) -> LlmOutcome {
    let (status_kind, permanent) = classify(err);
    let mut message = format!("provider error in stream: {}", err.describe());
    if let Some(s) = err.status {
        message.push_str(&format!(" (status {s})"));
    }
    let mut outcome = LlmOutcome::error(status_kind, message);
    outcome.permanent = permanent;
    outcome
}

/// A transport failure (connect, TLS, reset): always worth a retry.
pub fn transport(context: &str, err: &reqwest::Error) -> LlmOutcome {
    let mut detail = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        let text = s.to_string();
        if !detail.contains(&text) {
            detail.push_str(": ");
            detail.push_str(&text);
        }
        source = s.source();
    }
    LlmOutcome::error(StopReason::Timeout, format!("{context}: {detail}"))
}

/// A stream that cannot be understood.
pub fn malformed(message: impl Into<String>) -> LlmOutcome {
    LlmOutcome::error(StopReason::Malformed, message)
}

/// Removes every occurrence of `secret` from `text`. Keys shorter than
/// [`MIN_REDACTED_SECRET_CHARS`] are not searched for: they would blank out ordinary words
/// and no real provider issues keys that short.
pub fn redact(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(s) if s.chars().count() >= MIN_REDACTED_SECRET_CHARS => text.replace(s, "[redacted]"),
        _ => text.to_owned(),
    }
}

/// See [`redact`].
pub const MIN_REDACTED_SECRET_CHARS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn http_statuses_map_to_the_taxonomy() {
        let cases: Vec<(u16, &str, StopReason, bool, &str)> = vec![
            (
                401,
                r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
                StopReason::Auth,
                false,
                "HTTP 401: invalid_request_error/invalid_api_key: Incorrect API key provided",
            ),
            (
                403,
                r#"{"type":"error","error":{"type":"permission_error","message":"no access"}}"#,
                StopReason::Auth,
                false,
                "HTTP 403: permission_error: no access",
            ),
            (
                400,
                r#"{"error":{"message":"bad field","type":"invalid_request_error"}}"#,
                StopReason::Failed,
                true,
                "HTTP 400: invalid_request_error: bad field",
            ),
            (
                404,
                "not found",
                StopReason::Failed,
                true,
                "HTTP 404: not found",
            ),
            (
                429,
                r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#,
                StopReason::Timeout,
                false,
                "HTTP 429: rate_limit_error: slow down",
            ),
            (
                408,
                "",
                StopReason::Timeout,
                false,
                "HTTP 408: no details given",
            ),
            (
                500,
                "<html>boom</html>",
                StopReason::Timeout,
                false,
                "HTTP 500: <html>boom</html>",
            ),
            (
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                StopReason::Timeout,
                false,
                "HTTP 529: overloaded_error: Overloaded",
            ),
        ];
        for (status, body, kind, permanent, message) in cases {
            let got = http_status(status, body);
            assert_eq!(
                got,
                LlmOutcome {
                    status: kind,
                    error_message: Some(message.to_owned()),
                    permanent,
                    usage: None,
                },
                "HTTP {status}"
            );
        }
    }

    #[test]
    fn in_band_errors_map_by_type_and_code() {
        let cases = vec![
            (
                json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
                StopReason::Timeout,
                false,
            ),
            (
                json!({"error":{"message":"Tool call validation failed","type":"invalid_request_error","code":"tool_use_failed","status_code":400}}),
                StopReason::Failed,
                false,
            ),
            (
                json!({"id":"gen-1","error":{"code":400,"message":"Token limit reached"},"choices":[]}),
                StopReason::Failed,
                true,
            ),
            (
                json!({"error":{"type":"authentication_error","message":"invalid x-api-key"}}),
                StopReason::Auth,
                false,
            ),
            (
                json!({"error":{"message":"upstream connection reset"}}),
                StopReason::Timeout,
                false,
            ),
            (
                json!({"error":{"code":502,"message":"Bad gateway"}}),
                StopReason::Timeout,
                false,
            ),
            (json!({"error":"something odd"}), StopReason::Failed, false),
        ];
        for (value, kind, permanent) in cases {
            let err = ProviderError::from_value(&value).unwrap();
            let got = in_band(&err);
            assert_eq!((got.status, got.permanent), (kind, permanent), "{value}");
        }
    }

    #[test]
    fn chunks_without_error_are_not_errors() {
        assert_eq!(ProviderError::from_value(&json!({"error": null})), None);
        assert_eq!(
            ProviderError::from_value(&json!({"type":"message_start","message":{}})),
            None
        );
    }

    #[test]
    fn redaction_removes_the_key_everywhere() {
        assert_eq!(
            redact("key sk-abc123 and again sk-abc123", Some("sk-abc123")),
            "key [redacted] and again [redacted]"
        );
        assert_eq!(redact("a b c", Some("b")), "a b c");
        assert_eq!(redact("text", None), "text");
    }

    #[test]
    fn long_messages_are_cut_on_char_boundaries() {
        let long = "é".repeat(MAX_PROVIDER_MESSAGE_CHARS + 10);
        let got = http_status(500, &long);
        let message = got.error_message.unwrap();
        assert_eq!(
            message,
            format!("HTTP 500: {}…", "é".repeat(MAX_PROVIDER_MESSAGE_CHARS))
        );
    }
}
