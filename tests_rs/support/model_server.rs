//! A scripted model server: a real HTTP/1.1 server on 127.0.0.1 that answers each request with
//! the next scripted [`Reply`] and records every request it received.
//!
//! Replies are written as raw bytes with `connection: close`, so a test controls exactly what
//! the client sees: an SSE body split into chunks with delays between them, an HTTP error
//! status, a stream cut mid-way, or a stall that trips the client's idle timeout.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// HTTP 200 `text/event-stream`; each chunk is written as is, after its delay.
    Sse(Vec<Chunk>),
    /// Any status with a body (e.g. 401 with a JSON error, 500).
    Status {
        status: u16,
        content_type: String,
        body: String,
    },
    /// Headers, the given chunks, then nothing at all for `stall` (idle-timeout tests).
    Stall { chunks: Vec<Chunk>, stall: Duration },
}

/// A piece of a streamed body.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// Wait before writing.
    pub delay: Duration,
    /// Bytes to write.
    pub bytes: Vec<u8>,
}

impl Reply {
    /// An SSE body sent in one write.
    pub fn sse(body: impl Into<String>) -> Self {
        Reply::Sse(vec![Chunk {
            delay: Duration::ZERO,
            bytes: body.into().into_bytes(),
        }])
    }

    /// An SSE body split into writes of `size` bytes (events split across network reads).
    pub fn sse_split(body: impl Into<String>, size: usize, delay: Duration) -> Self {
        let bytes = body.into().into_bytes();
        Reply::Sse(
            bytes
                .chunks(size.max(1))
                .map(|c| Chunk {
                    delay,
                    bytes: c.to_vec(),
                })
                .collect(),
        )
    }

    /// An SSE body written after `delay` (e.g. to let tools of another turn finish first).
    pub fn sse_after(body: impl Into<String>, delay: Duration) -> Self {
        Reply::Sse(vec![Chunk {
            delay,
            bytes: body.into().into_bytes(),
        }])
    }

    /// Raw body bytes served verbatim in one write (recorded provider streams).
    pub fn sse_bytes(bytes: Vec<u8>) -> Self {
        Reply::Sse(vec![Chunk {
            delay: Duration::ZERO,
            bytes,
        }])
    }

    /// `body` in one write, then silence for `stall` with the connection open.
    pub fn stall(body: impl Into<String>, stall: Duration) -> Self {
        Reply::Stall {
            chunks: vec![Chunk {
                delay: Duration::ZERO,
                bytes: body.into().into_bytes(),
            }],
            stall,
        }
    }

    /// A status with a JSON body.
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Reply::Status {
            status,
            content_type: "application/json".into(),
            body: body.into(),
        }
    }
}

/// A request as the server received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// `POST`.
    pub method: String,
    /// Path with query.
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` when not JSON).
    pub body: serde_json::Value,
}

impl RecordedRequest {
    /// A header value by (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
}

/// The running server; stops when dropped.
pub struct ScriptedServer {
    port: u16,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedServer {
    /// Binds 127.0.0.1 on a free port and serves `replies` in order. Requests beyond the script
    /// get HTTP 599 with an explanatory body, so a test that sends too many requests fails
    /// loudly instead of hanging.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("addr: {e}"));
        let state = Arc::new(Mutex::new(State {
            replies: replies.into(),
            requests: Vec::new(),
        }));
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    break;
                };
                let st = st.clone();
                // Small scripted writes (1-byte chunks) must leave as separate segments.
                let _ = sock.set_nodelay(true);
                tokio::spawn(async move {
                    let _ = serve(sock, st).await;
                });
            }
        });
        ScriptedServer { port, state, task }
    }

    /// `http://127.0.0.1:<port>` (Anthropic-style base URL).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:<port>/v1` (OpenAI-style base URL).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// Appends replies to the script.
    pub fn push(&self, reply: Reply) {
        if let Ok(mut s) = self.state.lock() {
            s.replies.push_back(reply);
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }

    /// Replies not yet used.
    pub fn remaining(&self) -> usize {
        self.state.lock().map(|s| s.replies.len()).unwrap_or(0)
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut sock: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let reply = {
        let mut s = state
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        s.requests.push(RecordedRequest {
            method,
            path,
            headers,
            body: json,
        });
        s.replies.pop_front()
    };
    let reply = reply.unwrap_or_else(|| Reply::Status {
        status: 599,
        content_type: "text/plain".into(),
        body: "scripted model server: no reply left in the script".into(),
    });
    match reply {
        Reply::Status {
            status,
            content_type,
            body,
        } => {
            let head = format!(
                "HTTP/1.1 {status} Scripted\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(body.as_bytes()).await?;
        }
        Reply::Sse(chunks) => {
            write_sse_head(&mut sock).await?;
            write_chunks(&mut sock, &chunks).await?;
        }
        Reply::Stall { chunks, stall } => {
            write_sse_head(&mut sock).await?;
            write_chunks(&mut sock, &chunks).await?;
            tokio::time::sleep(stall).await;
        }
    }
    sock.flush().await?;
    sock.shutdown().await
}

async fn write_sse_head(sock: &mut TcpStream) -> std::io::Result<()> {
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    )
    .await?;
    sock.flush().await
}

async fn write_chunks(sock: &mut TcpStream, chunks: &[Chunk]) -> std::io::Result<()> {
    for c in chunks {
        if !c.delay.is_zero() {
            tokio::time::sleep(c.delay).await;
        }
        sock.write_all(&c.bytes).await?;
        sock.flush().await?;
    }
    Ok(())
}
