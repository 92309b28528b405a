//! Engine overhead benchmark (`make bench`): a 200-turn scripted conversation, each turn one
//! `exec_command true`, against an instant local model server. Prints wall time and the
//! harness's own CPU time per turn (RUSAGE_SELF: the bash children are not counted).
//!
//! It runs twice: with the host's login profile (what users get: `bash -lc` reads it on every
//! command) and again in a child process whose `HOME` is an empty folder, so the wall time
//! shows the harness rather than the profile.

use std::sync::Arc;
use std::time::Instant;

use penguin_harness_core::approval::{Decision, FixedApprover};
use penguin_harness_core::config::ClientType;
use penguin_harness_core::protocol::EventPayload;
use penguin_harness_tests::agent::{TestAgent, run_task};
use penguin_harness_tests::sse::openai;
use penguin_harness_tests::{Reply, ScriptedServer};

const TURNS: usize = 200;

fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage struct into the pointer we own.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return f64::NAN;
    }
    // SAFETY: getrusage returned 0, so the struct is initialized.
    let u = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Set in the child run of this benchmark.
const PHASE_VAR: &str = "PENGUIN_BENCH_ENGINE_PHASE";

fn main() {
    let phase = std::env::var(PHASE_VAR).unwrap_or_else(|_| "host login profile".to_owned());
    measure(&phase);
    if std::env::var_os(PHASE_VAR).is_none() {
        let home = std::env::temp_dir().join(format!("penguin-bench-home-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&home);
        match std::env::current_exe() {
            Ok(exe) => {
                let status = std::process::Command::new(exe)
                    .env(PHASE_VAR, "empty HOME")
                    .env("HOME", &home)
                    .status();
                if let Err(e) = status {
                    eprintln!("cannot rerun with an empty HOME: {e}");
                }
            }
            Err(e) => eprintln!("cannot find the benchmark binary: {e}"),
        }
        let _ = std::fs::remove_dir_all(&home);
    }
}

fn measure(phase: &str) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            std::process::exit(1);
        }
    };
    rt.block_on(async {
        let mut replies: Vec<Reply> = (0..TURNS)
            .map(|i| Reply::sse(openai::exec(&format!("call_{i}"), "true")))
            .collect();
        replies.push(Reply::sse(openai::text("all done")));
        let server = ScriptedServer::start(replies).await;
        let agent = TestAgent::new().with_host_profile();
        let session = agent.session(ClientType::OpenAiChat, &server.openai_base_url());
        let cpu0 = cpu_seconds();
        let t0 = Instant::now();
        let stream = run_task(
            &session,
            "run true 200 times",
            Some(Arc::new(FixedApprover(Decision::Allow))),
        )
        .await;
        let wall = t0.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        let requests = stream
            .iter()
            .filter(|m| matches!(m.event(), Some(EventPayload::RequestEnd(_))))
            .count();
        println!(
            "engine ({phase}): {requests} requests, {TURNS} exec_command turns, {} messages streamed",
            stream.len()
        );
        println!(
            "engine ({phase}): wall {:.3} s total, {:.2} ms/turn; harness CPU {:.3} s total, {:.2} ms/turn",
            wall,
            wall * 1e3 / TURNS as f64,
            cpu,
            cpu * 1e3 / TURNS as f64
        );
    });
}
