//! Command sessions end to end: `exec_command` and `input_command` driven through
//! `Environment::execute_tool` (as the engine drives them) against real `bash -lc` processes.
//!
//! Most rigs give commands an empty `HOME` through the manager's vault: the login shell then
//! skips this machine's per-user profile, which costs ~200 ms per command, and the suite stays
//! fast. Everything else (the login shell, process groups, pipes, ptys, signals) is real.
//! Waits for asynchronous facts (a process group dying, a background command exiting) poll the
//! condition with a generous bound; no assertion is about how long something took.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use penguin_harness_core::config::{ToolDefinitionConfig, default_tool_definitions};
use penguin_harness_core::environment::Environment;
use penguin_harness_core::protocol::{
    EventType, ModelPayload, OmniMessage, PartialAggregator, Role, StopReason,
    ToolCallOutputPayload, ToolCallPayload,
};
use penguin_harness_core::tools::ToolServices;
use penguin_harness_core::tools::exec::CommandSessionManager;
use penguin_harness_tests::TempDir;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------------
// Rig

struct Rig {
    env: Arc<Environment>,
    manager: Arc<CommandSessionManager>,
    ws: TempDir,
    _home: TempDir,
}

fn rig() -> Rig {
    rig_with(&[], |_| {})
}

/// A workspace, an empty HOME, the two command tools (tweaked by `tweak`) and a manager whose
/// vault holds HOME plus `vault`.
fn rig_with(vault: &[(&str, &str)], tweak: impl Fn(&mut ToolDefinitionConfig)) -> Rig {
    let ws = TempDir::new("exec-ws");
    let home = TempDir::new("exec-home");
    let mut vars: Vec<(String, String)> = vec![("HOME".into(), home.path().display().to_string())];
    vars.extend(
        vault
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let manager = Arc::new(CommandSessionManager::with_vault(vars));
    let services = ToolServices {
        commands: manager.clone(),
    };
    let defs: Vec<ToolDefinitionConfig> = default_tool_definitions()
        .into_iter()
        .filter(|d| d.name == "exec_command" || d.name == "input_command")
        .map(|mut d| {
            tweak(&mut d);
            d
        })
        .collect();
    let env = Arc::new(Environment::new(ws.path(), defs, true, services));
    Rig {
        env,
        manager,
        ws,
        _home: home,
    }
}

#[derive(Debug)]
struct Out {
    text: String,
    stop: StopReason,
}

fn call_payload(name: &str, args: &Value) -> ToolCallPayload {
    ToolCallPayload {
        role: Role::Assistant,
        name: name.into(),
        arguments: args.to_string(),
        tool_call_id: "call_1".into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    }
}

/// Starts a call; the receiver sees every message of it as it streams.
fn start_call(
    env: &Arc<Environment>,
    name: &str,
    args: Value,
    cancel: &CancellationToken,
) -> (
    mpsc::Receiver<OmniMessage>,
    JoinHandle<ToolCallOutputPayload>,
) {
    let (tx, rx) = mpsc::channel(4096);
    let env = env.clone();
    let call = call_payload(name, &args);
    let cancel = cancel.clone();
    let handle = tokio::spawn(async move { env.execute_tool(&call, &cancel, None, &tx).await });
    (rx, handle)
}

/// Runs a call to the end, checks its framing (start, deltas, stop, complete; joined deltas
/// equal the complete output) and returns the output.
async fn call_with(
    env: &Arc<Environment>,
    name: &str,
    args: Value,
    cancel: &CancellationToken,
) -> Out {
    let (mut rx, handle) = start_call(env, name, args, cancel);
    let mut stream = Vec::new();
    while let Some(m) = rx.recv().await {
        stream.push(m);
    }
    let payload = handle.await.unwrap_or_else(|e| panic!("call task: {e}"));
    check_framing(&stream, &payload);
    Out {
        text: payload.output,
        stop: payload.stop_reason,
    }
}

async fn call(env: &Arc<Environment>, name: &str, args: Value) -> Out {
    call_with(env, name, args, &CancellationToken::new()).await
}

fn check_framing(stream: &[OmniMessage], payload: &ToolCallOutputPayload) {
    let first = stream.first().and_then(OmniMessage::model);
    assert!(
        matches!(first, Some(ModelPayload::PartialToolCallOutput(p)) if p.event_type == EventType::Start),
        "first message is start: {first:?}"
    );
    assert_eq!(
        stream.last().and_then(OmniMessage::as_tool_call_output),
        Some(payload)
    );
    let mut agg = PartialAggregator::new();
    let folded: Vec<ModelPayload> = stream[..stream.len() - 1]
        .iter()
        .filter_map(|m| agg.push(m))
        .collect();
    assert_eq!(folded, vec![ModelPayload::ToolCallOutput(payload.clone())]);
}

fn delta_text(m: &OmniMessage) -> Option<&str> {
    match m.model() {
        Some(ModelPayload::PartialToolCallOutput(p)) if p.event_type == EventType::Delta => {
            Some(p.output.as_str())
        }
        _ => None,
    }
}

fn running_note(id: &str) -> String {
    format!(
        "[process running with process_id {id}; use input_command to send input or poll for output]"
    )
}

fn still_running(id: &str) -> String {
    format!("[process still running with process_id {id}]")
}

fn unknown_id(id: &str) -> String {
    format!(
        "[input_command error: unknown process_id {id} (the session may have exited and been cleared)]"
    )
}

/// Splits an output into (content, note) where the note is the given last line.
fn split_note<'a>(text: &'a str, note: &str) -> &'a str {
    let Some(content) = text.strip_suffix(note) else {
        panic!("output does not end with {note:?}: {text:?}");
    };
    content.strip_suffix('\n').unwrap_or(content)
}

/// The `proc-…` id in a running note, checked for shape.
fn id_from_running(text: &str) -> String {
    let start = text
        .rfind("process_id proc-")
        .unwrap_or_else(|| panic!("no process id in {text:?}"))
        + "process_id ".len();
    let id: String = text[start..].chars().take(13).collect();
    assert!(
        id.len() == 13
            && id[5..]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "id shape: {id:?}"
    );
    id
}

/// Starts a command that must still be running after `yield_ms`; returns (id, content so far).
async fn background(env: &Arc<Environment>, args: Value) -> (String, String) {
    let out = call(env, "exec_command", args).await;
    assert_eq!(out.stop, StopReason::Completed, "{out:?}");
    let id = id_from_running(&out.text);
    let content = split_note(&out.text, &running_note(&id)).to_owned();
    (id, content)
}

/// Polls `id` (optionally writing `chars` first) until the accumulated content satisfies
/// `done`; every poll must report the process as still running. Returns the accumulation.
async fn poll_until(
    env: &Arc<Environment>,
    id: &str,
    mut acc: String,
    chars: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let mut first = true;
    for _ in 0..80 {
        if done(&acc) && !first {
            return acc;
        }
        let args = if first && !chars.is_empty() {
            json!({"process_id": id, "chars": chars, "yield_time_ms": 250})
        } else {
            json!({"process_id": id, "yield_time_ms": 250})
        };
        first = false;
        let out = call(env, "input_command", args).await;
        assert_eq!(out.stop, StopReason::Completed, "{out:?}");
        acc.push_str(split_note(&out.text, &still_running(id)));
        if done(&acc) {
            return acc;
        }
    }
    panic!("condition never met; accumulated {acc:?}");
}

// ---------------------------------------------------------------------------------------------
// Processes

/// Members of process group `pgid` that are not zombies, from /proc.
fn live_members(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so parse after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// Waits (bounded) until no live process is left in group `pgid`.
async fn group_gone(pgid: i32) -> bool {
    for _ in 0..250 {
        if live_members(pgid).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn pid_gone(pid: i32) -> bool {
    for _ in 0..250 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn until_exited(manager: &CommandSessionManager, id: &str) {
    for _ in 0..500 {
        if manager.list().iter().any(|s| s.id == id && !s.running) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{id} never exited");
}

fn pid_of(manager: &CommandSessionManager, id: &str) -> i32 {
    manager
        .list()
        .iter()
        .find(|s| s.id == id)
        .map(|s| s.pid)
        .unwrap_or_else(|| panic!("{id} is not registered"))
}

fn touch(dir: &Path, name: &str) {
    std::fs::write(dir.join(name), b"").unwrap_or_else(|e| panic!("touch {name}: {e}"));
}

fn parse_pid(line: &str) -> i32 {
    line.trim()
        .parse()
        .unwrap_or_else(|e| panic!("not a pid: {line:?}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// exec_command in the foreground

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_signals_and_decoding() {
    let r = rig();
    let table: Vec<(&str, &str, StopReason)> = vec![
        ("echo hi", "hi\n", StopReason::Completed),
        ("true", "[no output]", StopReason::Completed),
        (
            "echo out; echo err >&2; echo out2; exit 3",
            "out\nerr\nout2\n\n[exit code: 3]",
            StopReason::Failed,
        ),
        ("exit 1", "[exit code: 1]", StopReason::Failed),
        (
            "kill -TERM $$",
            "[terminated by signal SIGTERM]",
            StopReason::Failed,
        ),
        (
            "echo bye; kill -KILL $$",
            "bye\n\n[terminated by signal SIGKILL]",
            StopReason::Failed,
        ),
        // A character split across two reads arrives whole.
        (
            "printf '\\xe2'; sleep 0.1; printf '\\x82\\xac'",
            "€",
            StopReason::Completed,
        ),
        // Invalid bytes, and an incomplete character at the end, become U+FFFD.
        (
            "printf 'a\\xffb\\xe2\\x82'",
            "a\u{FFFD}b\u{FFFD}",
            StopReason::Completed,
        ),
        (
            "shopt -q login_shell && echo login",
            "login\n",
            StopReason::Completed,
        ),
    ];
    for (cmd, want, stop) in table {
        let out = call(&r.env, "exec_command", json!({"cmd": cmd})).await;
        assert_eq!((out.text.as_str(), out.stop), (want, stop), "{cmd}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_blank_cmd() {
    let r = rig();
    for args in [json!({}), json!({"cmd": ""}), json!({"cmd": "  \n"})] {
        let out = call(&r.env, "exec_command", args.clone()).await;
        assert_eq!(
            (out.text.as_str(), out.stop),
            (
                "Missing required argument \"cmd\" for exec_command.",
                StopReason::Failed
            ),
            "{args}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workdir_relative_absolute_missing() {
    let r = rig();
    let ws = r.ws.path();
    std::fs::create_dir(ws.join("sub")).unwrap_or_else(|e| panic!("{e}"));
    touch(ws, "file");
    let other = TempDir::new("exec-other");
    let cases: Vec<(Value, String, StopReason)> = vec![
        (
            json!({"cmd": "pwd"}),
            format!("{}\n", ws.display()),
            StopReason::Completed,
        ),
        (
            json!({"cmd": "pwd", "workdir": "sub"}),
            format!("{}/sub\n", ws.display()),
            StopReason::Completed,
        ),
        (
            json!({"cmd": "pwd", "workdir": other.path().display().to_string()}),
            format!("{}\n", other.path().display()),
            StopReason::Completed,
        ),
        (
            json!({"cmd": "pwd", "workdir": "nope"}),
            format!(
                "[spawn error: working directory does not exist: {}/nope]",
                ws.display()
            ),
            StopReason::Failed,
        ),
        (
            json!({"cmd": "pwd", "workdir": "file"}),
            format!(
                "[spawn error: working directory is not a directory: {}/file]",
                ws.display()
            ),
            StopReason::Failed,
        ),
    ];
    for (args, want, stop) in cases {
        let out = call(&r.env, "exec_command", args.clone()).await;
        assert_eq!(
            (out.text.as_str(), out.stop),
            (want.as_str(), stop),
            "{args}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_is_host_then_vault_then_forced() {
    let r = rig_with(
        &[
            ("TERM", "xterm-256color"),
            ("PAGER", "less"),
            ("PENGUIN_TEST_VAULT", "from-vault"),
        ],
        |_| {},
    );
    let host = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let cmd = r#"printf '%s|' "$TERM" "$NO_COLOR" "$PAGER" "$GIT_PAGER" "$GIT_EDITOR" "$GIT_TERMINAL_PROMPT" "$PENGUIN_TEST_VAULT" "$CARGO_MANIFEST_DIR""#;
    let want = format!("dumb|1|cat|cat|true|0|from-vault|{host}|");
    for tty in [false, true] {
        let out = call(&r.env, "exec_command", json!({"cmd": cmd, "tty": tty})).await;
        assert_eq!(
            (out.text.as_str(), out.stop),
            (want.as_str(), StopReason::Completed),
            "tty {tty}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_failure_is_reported() {
    let r = rig_with(&[("PATH", "/nonexistent-penguin-dir")], |_| {});
    let out = call(&r.env, "exec_command", json!({"cmd": "true"})).await;
    assert_eq!(
        (out.text.as_str(), out.stop),
        (
            "[spawn error: failed to start bash: No such file or directory (os error 2)]",
            StopReason::Failed
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipes_by_default_a_terminal_with_tty() {
    let r = rig();
    let cmd = "[ -t 0 ] && echo in-tty || echo in-pipe; [ -t 1 ] && echo out-tty || echo out-pipe; echo err >&2";
    let pipes = call(&r.env, "exec_command", json!({"cmd": cmd})).await;
    assert_eq!(pipes.text, "in-pipe\nout-pipe\nerr\n");
    let tty = call(&r.env, "exec_command", json!({"cmd": cmd, "tty": true})).await;
    assert_eq!(tty.text, "in-tty\r\nout-tty\r\nerr\r\n");
    let tty_exit = call(
        &r.env,
        "exec_command",
        json!({"cmd": "exit 4", "tty": true}),
    )
    .await;
    assert_eq!(
        (tty_exit.text.as_str(), tty_exit.stop),
        ("[exit code: 4]", StopReason::Failed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_streams_while_the_command_runs() {
    let r = rig();
    let cancel = CancellationToken::new();
    let (mut rx, handle) = start_call(
        &r.env,
        "exec_command",
        json!({"cmd": "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second"}),
        &cancel,
    );
    let mut stream = Vec::new();
    // The command cannot finish before `go` exists, so this delta streamed while it ran.
    loop {
        let m = rx
            .recv()
            .await
            .unwrap_or_else(|| panic!("stream ended early"));
        let first = delta_text(&m) == Some("first\n");
        stream.push(m);
        if first {
            break;
        }
    }
    assert!(!handle.is_finished());
    touch(r.ws.path(), "go");
    while let Some(m) = rx.recv().await {
        stream.push(m);
    }
    let payload = handle.await.unwrap_or_else(|e| panic!("{e}"));
    check_framing(&stream, &payload);
    assert_eq!(
        (payload.output.as_str(), payload.stop_reason),
        ("first\nsecond\n", StopReason::Completed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_output_is_truncated_and_never_blocks_the_command() {
    let r = rig();
    let out = call(
        &r.env,
        "exec_command",
        json!({"cmd": "head -c 5000000 /dev/zero | tr '\\0' b; echo; echo end"}),
    )
    .await;
    assert_eq!(
        (out.text, out.stop),
        (
            format!(
                "{}\n[output truncated: exceeded 16000 chars]",
                "b".repeat(16_000)
            ),
            StopReason::Completed
        )
    );
}

// ---------------------------------------------------------------------------------------------
// Process groups

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_child_does_not_hold_the_call() {
    let r = rig();
    // With a 20 s yield, a call held by the child would come back with a process id instead.
    let out = call(
        &r.env,
        "exec_command",
        json!({"cmd": "sleep 100 & echo $!", "yield_time_ms": 20_000}),
    )
    .await;
    assert_eq!(out.stop, StopReason::Completed);
    let pid = parse_pid(&out.text);
    assert_eq!(out.text, format!("{pid}\n"));
    assert!(
        pid_gone(pid).await,
        "the background sleep was killed with its group"
    );
    assert!(r.manager.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_call_leaves_no_process_alive() {
    let r = rig();
    // Plain children, a nested one, and one that ignores SIGTERM (only the SIGKILL that always
    // follows gets it).
    let cmd =
        "echo $$; sleep 100 & sleep 101 & (sleep 102 &); (trap '' TERM; sleep 103) & echo done";
    let out = call(&r.env, "exec_command", json!({"cmd": cmd})).await;
    let pgid = parse_pid(out.text.lines().next().unwrap_or_default());
    assert_eq!(
        (out.text.clone(), out.stop),
        (format!("{pgid}\ndone\n"), StopReason::Completed)
    );
    assert!(
        group_gone(pgid).await,
        "left alive: {:?}",
        live_members(pgid)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_timeout_kills_the_group() {
    // A timeout below the 250 ms minimum yield fires before the yield does.
    let r = rig_with(&[], |d| {
        if d.name == "exec_command" {
            d.timeout_ms = 200;
        }
    });
    for _attempt in 0..5 {
        let out = call(&r.env, "exec_command", json!({"cmd": "echo $$; sleep 30"})).await;
        if out.stop == StopReason::Completed {
            // Under heavy load both timers can be due in the same poll and the yield may win
            // the race: that call says nothing about timeouts, so clean up and retry.
            let id = id_from_running(&out.text);
            assert!(r.manager.remove(&id));
            continue;
        }
        assert_eq!(out.stop, StopReason::Failed, "{out:?}");
        let Some(content) = out.text.strip_suffix("\n[tool timeout: exceeded 200ms]") else {
            // The shell had not printed its pid before the timeout: nothing to inspect, retry.
            assert_eq!(out.text, "[tool timeout: exceeded 200ms]");
            continue;
        };
        let pgid = parse_pid(content);
        assert_eq!(content, format!("{pgid}\n"));
        assert!(
            group_gone(pgid).await,
            "left alive: {:?}",
            live_members(pgid)
        );
        return;
    }
    panic!("no attempt timed out after the shell printed its pid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_exec_kills_but_aborting_a_poll_does_not() {
    let r = rig();
    // exec_command: abort once the pid streamed.
    let cancel = CancellationToken::new();
    let (mut rx, handle) = start_call(
        &r.env,
        "exec_command",
        json!({"cmd": "echo $$; sleep 30", "yield_time_ms": 20_000}),
        &cancel,
    );
    let mut stream = Vec::new();
    let pgid = loop {
        let m = rx
            .recv()
            .await
            .unwrap_or_else(|| panic!("stream ended early"));
        let pid = delta_text(&m).map(parse_pid);
        stream.push(m);
        if let Some(pid) = pid {
            break pid;
        }
    };
    cancel.cancel();
    while let Some(m) = rx.recv().await {
        stream.push(m);
    }
    let payload = handle.await.unwrap_or_else(|e| panic!("{e}"));
    check_framing(&stream, &payload);
    assert_eq!(
        (payload.output, payload.stop_reason),
        (
            format!("{pgid}\n\n[interrupted: tool aborted by user]"),
            StopReason::Aborted
        )
    );
    assert!(
        group_gone(pgid).await,
        "left alive: {:?}",
        live_members(pgid)
    );

    // input_command: aborting a poll leaves the process running and registered.
    let (id, _) = background(&r.env, json!({"cmd": "sleep 30", "yield_time_ms": 250})).await;
    let pid = pid_of(&r.manager, &id);
    let cancel = CancellationToken::new();
    let (mut rx, handle) = start_call(
        &r.env,
        "input_command",
        json!({"process_id": id, "yield_time_ms": 20_000}),
        &cancel,
    );
    let _start = rx.recv().await;
    cancel.cancel();
    while rx.recv().await.is_some() {}
    let payload = handle.await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (payload.output.as_str(), payload.stop_reason),
        ("[interrupted: tool aborted by user]", StopReason::Aborted)
    );
    assert!(alive(pid));
    let poll = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "yield_time_ms": 250}),
    )
    .await;
    assert_eq!(
        (poll.text, poll.stop),
        (still_running(&id), StopReason::Completed)
    );
    r.env.dispose();
    assert!(group_gone(pid).await);
}

// ---------------------------------------------------------------------------------------------
// Background sessions and input_command

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_yield_then_polled_to_exit_then_removed() {
    let r = rig();
    let (id, seen) = background(
        &r.env,
        json!({"cmd": "echo start; while [ ! -e go ]; do sleep 0.02; done; echo end", "yield_time_ms": 250}),
    )
    .await;
    let seen = poll_until(&r.env, &id, seen, "", |acc| acc == "start\n").await;
    assert_eq!(seen, "start\n");
    touch(r.ws.path(), "go");
    let last = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "yield_time_ms": 20_000}),
    )
    .await;
    assert_eq!(
        (last.text.as_str(), last.stop),
        ("end\n", StopReason::Completed)
    );
    // Exited and reported: the session is gone.
    let again = call(&r.env, "input_command", json!({"process_id": id})).await;
    assert_eq!(
        (again.text, again.stop),
        (unknown_id(&id), StopReason::Failed)
    );
    assert!(r.manager.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_background_command_reports_its_exit_code_on_the_poll() {
    let r = rig();
    let (id, seen) = background(
        &r.env,
        json!({"cmd": "while [ ! -e go ]; do sleep 0.02; done; echo bad >&2; exit 7", "yield_time_ms": 250}),
    )
    .await;
    assert_eq!(seen, "");
    touch(r.ws.path(), "go");
    until_exited(&r.manager, &id).await;
    let out = call(&r.env, "input_command", json!({"process_id": id})).await;
    assert_eq!(
        (out.text.as_str(), out.stop),
        ("bad\n\n[exit code: 7]", StopReason::Failed)
    );
    assert!(r.manager.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_reaches_cat_and_mixed_ctrl_c_is_rejected() {
    let r = rig();
    let (id, seen) = background(&r.env, json!({"cmd": "cat", "yield_time_ms": 250})).await;
    assert_eq!(seen, "");
    let acc = poll_until(&r.env, &id, String::new(), "hello\n", |acc| {
        acc == "hello\n"
    })
    .await;
    assert_eq!(acc, "hello\n");
    let acc = poll_until(&r.env, &id, String::new(), "héllo wörld\n", |acc| {
        acc == "héllo wörld\n"
    })
    .await;
    assert_eq!(acc, "héllo wörld\n");

    let mixed = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "chars": "abc\u{3}"}),
    )
    .await;
    assert_eq!(
        (mixed.text.as_str(), mixed.stop),
        (
            "[input_command error: chars mixes U+0003 (Ctrl-C) with other content; send \"\\u0003\" alone to interrupt]",
            StopReason::Failed
        )
    );
    // Nothing of the rejected input was written.
    let poll = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "yield_time_ms": 250}),
    )
    .await;
    assert_eq!(poll.text, still_running(&id));

    let stop = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "chars": "\u{3}", "yield_time_ms": 20_000}),
    )
    .await;
    assert_eq!(
        (stop.text.as_str(), stop.stop),
        ("[terminated by signal SIGINT]", StopReason::Failed)
    );
    let gone = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "chars": "x"}),
    )
    .await;
    assert_eq!(gone.text, unknown_id(&id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_sleep_and_its_children() {
    let r = rig();
    let (id, _) = background(
        &r.env,
        json!({"cmd": "sleep 100; echo never", "yield_time_ms": 250}),
    )
    .await;
    let pgid = pid_of(&r.manager, &id);
    let out = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "chars": "\u{3}", "yield_time_ms": 20_000}),
    )
    .await;
    assert_eq!(
        (out.text.as_str(), out.stop),
        ("[terminated by signal SIGINT]", StopReason::Failed)
    );
    assert!(group_gone(pgid).await);
    assert!(r.manager.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_repl_over_a_tty() {
    let r = rig();
    let (id, seen) = background(
        &r.env,
        json!({"cmd": "python3 -i -q", "tty": true, "yield_time_ms": 250}),
    )
    .await;
    let seen = poll_until(&r.env, &id, seen, "", |acc| acc.ends_with(">>> ")).await;
    assert_eq!(seen, ">>> ");
    let seen = poll_until(&r.env, &id, seen, "print(6*7)\n", |acc| {
        acc.ends_with("42\r\n>>> ")
    })
    .await;
    assert_eq!(seen, ">>> print(6*7)\r\n42\r\n>>> ");
    let last = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "chars": "exit()\n", "yield_time_ms": 20_000}),
    )
    .await;
    assert_eq!(
        (last.text.as_str(), last.stop),
        ("exit()\r\n", StopReason::Completed)
    );
    assert!(r.manager.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_password_prompt_over_a_tty() {
    let r = rig();
    let cmd = "read -s -p 'Password: ' pw; echo; echo \"got ${#pw} chars\"";
    let (id, seen) = background(
        &r.env,
        json!({"cmd": cmd, "tty": true, "yield_time_ms": 250}),
    )
    .await;
    let seen = poll_until(&r.env, &id, seen, "", |acc| acc == "Password: ").await;
    let last = call(
        &r.env,
        "input_command",
        json!({"process_id": id, "chars": "hunter2\n", "yield_time_ms": 20_000}),
    )
    .await;
    assert_eq!(last.stop, StopReason::Completed);
    // The typed password is never echoed.
    assert_eq!(
        format!("{seen}{}", last.text),
        "Password: \r\ngot 7 chars\r\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_and_unknown_process_ids() {
    let r = rig();
    for args in [json!({}), json!({"process_id": ""})] {
        let out = call(&r.env, "input_command", args.clone()).await;
        assert_eq!(
            (out.text.as_str(), out.stop),
            (
                "Missing required argument \"process_id\" for input_command.",
                StopReason::Failed
            ),
            "{args}"
        );
    }
    let out = call(
        &r.env,
        "input_command",
        json!({"process_id": "proc-00000000", "chars": "x"}),
    )
    .await;
    assert_eq!(
        (out.text, out.stop),
        (unknown_id("proc-00000000"), StopReason::Failed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_output_is_capped_at_one_mebichar_with_a_drop_marker() {
    // Close-out truncation off, so the whole buffer is visible.
    let r = rig_with(&[], |d| d.max_output_length = 0);
    let (id, seen) = background(
        &r.env,
        json!({
            "cmd": "while [ ! -e go ]; do sleep 0.02; done; head -c 3000000 /dev/zero | tr '\\0' a; echo; echo done",
            "yield_time_ms": 250
        }),
    )
    .await;
    assert_eq!(seen, "");
    touch(r.ws.path(), "go");
    until_exited(&r.manager, &id).await;
    let out = call(&r.env, "input_command", json!({"process_id": id})).await;
    assert_eq!(out.stop, StopReason::Completed);
    // The reader may still be draining the pipe's last bytes when the exit is seen; those
    // arrive after the marker, so the kept part is the 1 MiB cap plus at most what was in
    // flight. Whatever the split, the text is the marker then the exact tail of the output.
    let full_len = 3_000_000 + "\ndone\n".len();
    let dropped: usize = out
        .text
        .strip_prefix("[... ")
        .and_then(|t| t.split_once(' '))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no drop marker: {:?}", &out.text[..80.min(out.text.len())]));
    let kept = full_len - dropped;
    assert!(
        (1_048_576..=1_048_576 + 2 * 65_536).contains(&kept),
        "kept {kept} chars"
    );
    let want = format!(
        "[... {dropped} chars of earlier output dropped ...]\n{}\ndone\n",
        "a".repeat(kept - "\ndone\n".len())
    );
    assert!(out.text == want, "got {} chars", out.text.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_65th_session_evicts_exited_ones_first_then_the_lru_running_one() {
    let r = rig();
    let started = join_all(
        (0..64).map(|_| background(&r.env, json!({"cmd": "sleep 60", "yield_time_ms": 250}))),
    )
    .await;
    assert_eq!(started.len(), 64);
    let list = r.manager.list();
    assert_eq!(list.len(), 64);
    let (exited_a, exited_b, lru) = (list[10].clone(), list[20].clone(), list[5].clone());
    // Two sessions exit without being polled.
    for s in [&exited_a, &exited_b] {
        nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(s.pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap_or_else(|e| panic!("killpg: {e}"));
    }
    until_exited(&r.manager, &exited_a.id).await;
    until_exited(&r.manager, &exited_b.id).await;
    // Every running session but `lru` is used again, so `lru` is the least recently used.
    let others: Vec<String> = list
        .iter()
        .filter(|s| ![&exited_a.id, &exited_b.id, &lru.id].contains(&&s.id))
        .map(|s| s.id.clone())
        .collect();
    let polls = join_all(others.iter().map(|id| {
        call(
            &r.env,
            "input_command",
            json!({"process_id": id, "yield_time_ms": 250}),
        )
    }))
    .await;
    for (id, out) in others.iter().zip(polls) {
        assert_eq!(out.text, still_running(id));
    }

    let ids = |m: &CommandSessionManager| m.list().into_iter().map(|s| s.id).collect::<Vec<_>>();
    // 65th: the first exited session (in registration order) goes.
    background(&r.env, json!({"cmd": "sleep 60", "yield_time_ms": 250})).await;
    let now = ids(&r.manager);
    assert_eq!(now.len(), 64);
    assert!(!now.contains(&exited_a.id) && now.contains(&exited_b.id) && now.contains(&lru.id));
    // 66th: the other exited one.
    background(&r.env, json!({"cmd": "sleep 60", "yield_time_ms": 250})).await;
    let now = ids(&r.manager);
    assert!(!now.contains(&exited_b.id) && now.contains(&lru.id));
    // 67th: nothing exited, so the least recently used running session is killed.
    background(&r.env, json!({"cmd": "sleep 60", "yield_time_ms": 250})).await;
    let now = ids(&r.manager);
    assert_eq!(now.len(), 64);
    assert!(!now.contains(&lru.id));
    assert!(group_gone(lru.pid).await, "the evicted session was killed");
    let out = call(&r.env, "input_command", json!({"process_id": lru.id})).await;
    assert_eq!(out.text, unknown_id(&lru.id));
    for s in r.manager.list() {
        assert!(s.running && alive(s.pid), "{s:?}");
    }

    let pids: Vec<i32> = r.manager.list().iter().map(|s| s.pid).collect();
    r.env.dispose();
    for pid in pids {
        assert!(group_gone(pid).await, "{pid} survived dispose");
    }
}

// ---------------------------------------------------------------------------------------------
// Disposal

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispose_kills_every_session_and_refuses_new_ones() {
    let r = rig();
    let (a, _) = background(&r.env, json!({"cmd": "sleep 60", "yield_time_ms": 250})).await;
    let (b, _) = background(
        &r.env,
        json!({"cmd": "sleep 61 & sleep 62", "yield_time_ms": 250, "tty": true}),
    )
    .await;
    let (pa, pb) = (pid_of(&r.manager, &a), pid_of(&r.manager, &b));
    // A command still inside its call is killed too.
    let cancel = CancellationToken::new();
    let (mut rx, running) = start_call(
        &r.env,
        "exec_command",
        json!({"cmd": "echo $$; sleep 60", "yield_time_ms": 20_000}),
        &cancel,
    );
    let pc = loop {
        let m = rx
            .recv()
            .await
            .unwrap_or_else(|| panic!("stream ended early"));
        if let Some(t) = delta_text(&m) {
            break parse_pid(t);
        }
    };
    r.env.dispose();
    while rx.recv().await.is_some() {}
    let fg = running.await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (fg.output, fg.stop_reason),
        (
            format!("{pc}\n\n[terminated by signal SIGTERM]"),
            StopReason::Failed
        )
    );
    for pid in [pa, pb, pc] {
        assert!(group_gone(pid).await, "{pid} survived dispose");
    }
    for id in [&a, &b] {
        let out = call(&r.env, "input_command", json!({"process_id": id})).await;
        assert_eq!(out.text, unknown_id(id));
    }
    let after = call(&r.env, "exec_command", json!({"cmd": "echo hi"})).await;
    assert_eq!(
        (after.text.as_str(), after.stop),
        (
            "[spawn error: command sessions have been disposed]",
            StopReason::Failed
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_environment_and_manager_kills_everything() {
    let r = rig();
    let (id, _) = background(
        &r.env,
        json!({"cmd": "trap '' TERM; sleep 60", "yield_time_ms": 250}),
    )
    .await;
    let pgid = pid_of(&r.manager, &id);
    let Rig {
        env,
        manager,
        ws,
        _home,
    } = r;
    drop(env);
    drop(manager);
    assert!(
        group_gone(pgid).await,
        "left alive: {:?}",
        live_members(pgid)
    );
    drop((ws, _home));
}
