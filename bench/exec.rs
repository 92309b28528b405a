//! Benchmark of the command tools (not a test; run with
//! `cargo bench -p penguin-harness-tests --bench exec`). Prints:
//!
//! 1. `exec_command` round trip for `true` through `Environment::execute_tool`, against a raw
//!    `bash -lc true` and `bash -c true` spawn-and-wait (means and ratios), once with this
//!    machine's login profile and once with an empty `HOME` (the harness's own overhead);
//! 2. throughput of `head -c 200M /dev/zero | base64` through the tool against the same
//!    pipeline into /dev/null (MB/s of base64 output);
//! 3. peak RSS (VmHWM) of this process while 64 background sessions each print 100 MB.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use penguin_harness_core::config::default_tool_definitions;
use penguin_harness_core::environment::Environment;
use penguin_harness_core::protocol::{Role, StopReason, ToolCallOutputPayload, ToolCallPayload};
use penguin_harness_core::tools::ToolServices;
use penguin_harness_core::tools::exec::CommandSessionManager;
use penguin_harness_tests::TempDir;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Round trips per measurement.
const ROUND_TRIPS: u32 = 10;
/// Background sessions in the memory phase (the registry cap).
const FLOOD_SESSIONS: usize = 64;

fn environment(
    ws: &TempDir,
    vault: &[(String, String)],
) -> (Arc<Environment>, Arc<CommandSessionManager>) {
    let manager = Arc::new(CommandSessionManager::with_vault(vault.to_vec()));
    let defs = default_tool_definitions()
        .into_iter()
        .filter(|d| d.name == "exec_command" || d.name == "input_command")
        .collect();
    let env = Environment::new(
        ws.path(),
        defs,
        true,
        ToolServices {
            commands: manager.clone(),
        },
    );
    (Arc::new(env), manager)
}

async fn run(env: &Environment, name: &str, args: Value) -> ToolCallOutputPayload {
    let call = ToolCallPayload {
        role: Role::Assistant,
        name: name.into(),
        arguments: args.to_string(),
        tool_call_id: "bench".into(),
        stop_reason: StopReason::Completed,
        fidelity: None,
    };
    let (tx, mut rx) = mpsc::channel(1024);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let out = env
        .execute_tool(&call, &CancellationToken::new(), None, &tx)
        .await;
    drop(tx);
    let _ = drain.await;
    out
}

fn raw(args: &[&str], home: Option<&str>) -> Duration {
    let mut cmd = Command::new("bash");
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
    if let Some(h) = home {
        cmd.env("HOME", h);
    }
    let t = Instant::now();
    let status = cmd.status();
    let d = t.elapsed();
    if !status.as_ref().is_ok_and(|s| s.success()) {
        eprintln!("bash {args:?} failed: {status:?}");
    }
    d
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

async fn round_trips(label: &str, home: Option<&str>) {
    let ws = TempDir::new("bench-exec");
    let vault: Vec<(String, String)> = home
        .map(|h| vec![("HOME".to_owned(), h.to_owned())])
        .unwrap_or_default();
    let (env, _m) = environment(&ws, &vault);
    let _ = run(&env, "exec_command", json!({"cmd": "true"})).await; // warm-up
    let t = Instant::now();
    for _ in 0..ROUND_TRIPS {
        let out = run(&env, "exec_command", json!({"cmd": "true"})).await;
        assert_eq!(out.output, "[no output]");
    }
    let tool = t.elapsed() / ROUND_TRIPS;
    let mut lc = Duration::ZERO;
    let mut c = Duration::ZERO;
    for _ in 0..ROUND_TRIPS {
        lc += raw(&["-lc", "true"], home);
        c += raw(&["-c", "true"], home);
    }
    let (lc, c) = (lc / ROUND_TRIPS, c / ROUND_TRIPS);
    println!(
        "round trip `true` ({label}): exec_command {:.2} ms | raw bash -lc {:.2} ms | raw bash -c {:.2} ms | tool/bash-lc {:.2}x | tool/bash-c {:.1}x",
        ms(tool),
        ms(lc),
        ms(c),
        tool.as_secs_f64() / lc.as_secs_f64(),
        tool.as_secs_f64() / c.as_secs_f64()
    );
}

async fn throughput(home: &str) {
    let ws = TempDir::new("bench-exec");
    let (env, _m) = environment(&ws, &[("HOME".to_owned(), home.to_owned())]);
    let pipeline = "head -c 200M /dev/zero | base64";
    let out_bytes = (200u64 << 20).div_ceil(3) * 4 + (200u64 << 20).div_ceil(57); // + newlines
    let t = Instant::now();
    let out = run(&env, "exec_command", json!({"cmd": pipeline})).await;
    let tool = t.elapsed();
    assert_eq!(
        out.stop_reason,
        StopReason::Completed,
        "{}",
        &out.output[out.output.len().saturating_sub(200)..]
    );
    let timed = |sink: &str| {
        let t = Instant::now();
        let status = Command::new("bash")
            .args(["-lc", &format!("{pipeline} {sink}")])
            .env("HOME", home)
            .status();
        assert!(status.is_ok_and(|s| s.success()));
        t.elapsed()
    };
    let direct = timed("> /dev/null");
    // The same bytes through one more pipe, read by `cat`: the cost of any pipe reader.
    let via_cat = timed("| cat > /dev/null");
    let mbps = |d: Duration| out_bytes as f64 / 1e6 / d.as_secs_f64();
    println!(
        "throughput `{pipeline}` (~{} MB of output): through exec_command {:.0} MB/s ({:.2} s) | to /dev/null {:.0} MB/s ({:.2} s), tool/direct {:.2} | through `| cat > /dev/null` {:.0} MB/s ({:.2} s)",
        out_bytes / 1_000_000,
        mbps(tool),
        tool.as_secs_f64(),
        mbps(direct),
        direct.as_secs_f64(),
        direct.as_secs_f64() / tool.as_secs_f64(),
        mbps(via_cat),
        via_cat.as_secs_f64()
    );
}

async fn flood_memory(home: &str) {
    let ws = TempDir::new("bench-exec");
    let (env, manager) = environment(&ws, &[("HOME".to_owned(), home.to_owned())]);
    // Reset the peak so this phase is measured on its own (Linux: write 5 to clear_refs).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kib("VmHWM:");
    let t = Instant::now();
    let calls = (0..FLOOD_SESSIONS).map(|_| {
        let env = env.clone();
        tokio::spawn(async move {
            run(
                &env,
                "exec_command",
                json!({"cmd": "head -c 100M /dev/zero | tr '\\0' a", "yield_time_ms": 250}),
            )
            .await
        })
    });
    let _ = futures::future::join_all(calls).await;
    let mut peak_rss = 0;
    loop {
        peak_rss = peak_rss.max(status_kib("VmRSS:"));
        let running = manager.list().iter().filter(|s| s.running).count();
        if running == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = t.elapsed();
    let registered = manager.len();
    let after = status_kib("VmHWM:");
    env.dispose();
    println!(
        "64 background sessions x 100 MB ({registered} registered, {:.1} s): VmHWM {} -> {} KiB ({:.1} MiB peak; reset {}), max sampled VmRSS {:.1} MiB",
        elapsed.as_secs_f64(),
        before,
        after,
        after as f64 / 1024.0,
        if reset { "ok" } else { "unavailable" },
        peak_rss as f64 / 1024.0
    );
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return;
        }
    };
    let empty_home = TempDir::new("bench-home");
    let home = empty_home.path().display().to_string();
    runtime.block_on(async {
        flood_memory(&home).await;
        round_trips("host login profile", None).await;
        round_trips("empty HOME", Some(&home)).await;
        throughput(&home).await;
    });
}
