//! A small HTTP/1.1 file server on 127.0.0.1 for download tests: each path serves fixed bytes
//! with a chosen status, `content-type` and framing (a `content-length`, chunked transfer, a
//! declared length that does not match the body, or an endless chunked stream), and the
//! server records which paths were requested. Unknown paths get 404. Every response closes
//! its connection, so a test sees exactly the bytes it scripted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a body is delimited on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `content-length: <body length>`, then the body.
    Length,
    /// `transfer-encoding: chunked` (no length) in chunks of this many bytes.
    Chunked(usize),
    /// `content-length: <n>` whatever the body is, then the body, then the connection closes
    /// (a body shorter than declared is an incomplete transfer for the client).
    Declared(u64),
    /// `transfer-encoding: chunked`, the body repeated as one chunk after another until the
    /// client hangs up.
    Endless,
    /// `content-length: <body length>`, then nothing: the connection stays open, silent, until
    /// the client hangs up.
    Stall,
}

/// What one path serves.
#[derive(Clone, Debug)]
pub struct Resource {
    /// HTTP status.
    pub status: u16,
    /// `content-type` header; `None` sends none.
    pub content_type: Option<String>,
    /// The body bytes.
    pub body: Vec<u8>,
    /// How the body is delimited.
    pub framing: Framing,
}

impl Resource {
    /// HTTP 200 with a `content-length`.
    pub fn ok(content_type: Option<&str>, body: impl Into<Vec<u8>>) -> Self {
        Resource {
            status: 200,
            content_type: content_type.map(str::to_owned),
            body: body.into(),
            framing: Framing::Length,
        }
    }

    /// The same resource with another framing.
    pub fn framed(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// The same resource with another status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
}

#[derive(Default)]
struct State {
    resources: HashMap<String, Resource>,
    requests: Vec<String>,
}

/// The running server; stops accepting when dropped.
pub struct FileServer {
    port: u16,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl FileServer {
    /// Binds 127.0.0.1 on a free port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("addr: {e}"));
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, st).await;
                });
            }
        });
        FileServer { port, state, task }
    }

    /// Serves `resource` at `path` (which starts with `/`).
    pub fn put(&self, path: &str, resource: Resource) {
        if let Ok(mut s) = self.state.lock() {
            s.resources.insert(path.to_owned(), resource);
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The request targets received so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Largest request head accepted; a GET from a client is far smaller.
const MAX_HEAD_BYTES: usize = 64 * 1024;

async fn serve(mut sock: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut tmp = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = sock.read(&mut tmp).await?;
        if n == 0 || head.len() > MAX_HEAD_BYTES {
            return Ok(());
        }
        head.extend_from_slice(&tmp[..n]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let target = head
        .split("\r\n")
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .unwrap_or("/")
        .to_owned();
    let resource = {
        let mut s = state
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        s.requests.push(target.clone());
        s.resources.get(&target).cloned()
    };
    let resource = resource.unwrap_or_else(|| {
        Resource::ok(Some("text/plain"), format!("no resource at {target}")).with_status(404)
    });

    let mut head = format!("HTTP/1.1 {} Scripted\r\n", resource.status);
    if let Some(ct) = &resource.content_type {
        head.push_str(&format!("content-type: {ct}\r\n"));
    }
    match resource.framing {
        Framing::Length | Framing::Stall => {
            head.push_str(&format!("content-length: {}\r\n", resource.body.len()))
        }
        Framing::Declared(n) => head.push_str(&format!("content-length: {n}\r\n")),
        Framing::Chunked(_) | Framing::Endless => head.push_str("transfer-encoding: chunked\r\n"),
    }
    head.push_str("connection: close\r\n\r\n");
    sock.write_all(head.as_bytes()).await?;

    match resource.framing {
        Framing::Length | Framing::Declared(_) => sock.write_all(&resource.body).await?,
        Framing::Chunked(size) => {
            for piece in resource.body.chunks(size.max(1)) {
                write_chunk(&mut sock, piece).await?;
            }
            sock.write_all(b"0\r\n\r\n").await?;
        }
        Framing::Stall => {
            sock.flush().await?;
            // Whatever the client sends (nothing, normally) is ignored; EOF or an error means
            // it hung up.
            while sock.read(&mut tmp).await? > 0 {}
            return Ok(());
        }
        Framing::Endless => {
            if resource.body.is_empty() {
                return Err(std::io::Error::other("an endless body needs bytes"));
            }
            // Ends when the client closes the connection and a write fails.
            loop {
                write_chunk(&mut sock, &resource.body).await?;
            }
        }
    }
    sock.flush().await?;
    sock.shutdown().await
}

async fn write_chunk(sock: &mut TcpStream, piece: &[u8]) -> std::io::Result<()> {
    sock.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
        .await?;
    sock.write_all(piece).await?;
    sock.write_all(b"\r\n").await
}
