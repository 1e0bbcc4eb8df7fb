//! A chat-completions server on 127.0.0.1 that answers as a test or benchmark tells it to:
//! model answers, HTTP errors, `Retry-After`, slow answers, dropped connections, broken
//! bodies. It records every request and how many were in flight at once. `GET /models`
//! is answered by the server itself (404, or the list given to [`MockServer::list_models`])
//! and is neither a call nor recorded.
//!
//! ```
//! use vision2cad::vlm::mock::{MockReply, MockServer};
//! let server = MockServer::start(|_call, _body| MockReply::answer(r#"{"verdict": "accept"}"#)).unwrap();
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{Value, json};

/// What the server does with one request.
#[derive(Debug, Clone)]
pub enum MockReply {
    /// 200 with a chat completion whose message is `text`.
    Answer { text: String, input_tokens: u64, output_tokens: u64 },
    /// Any status with a body and extra headers (e.g. `Retry-After`).
    Status { code: u16, headers: Vec<(String, String)>, body: String },
    /// 200 with this raw body.
    Body(String),
    /// Close the connection without answering.
    Drop,
    /// Wait, then do the rest.
    Delay(Duration, Box<MockReply>),
}

impl MockReply {
    pub fn answer(text: impl Into<String>) -> MockReply {
        MockReply::Answer { text: text.into(), input_tokens: 1000, output_tokens: 100 }
    }

    pub fn status(code: u16, message: &str) -> MockReply {
        MockReply::Status { code, headers: Vec::new(), body: json!({"error": {"message": message}}).to_string() }
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// `POST`, `GET`...
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

type Handler = dyn Fn(usize, &Value) -> MockReply + Send + Sync;

#[derive(Default)]
struct State {
    received: Mutex<Vec<Received>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    calls: AtomicUsize,
    stop: AtomicBool,
    /// Messages of handler panics (a failed assertion inside a handler).
    panics: Mutex<Vec<String>>,
    /// What `GET /models` lists; `None`: 404, as servers that list nothing answer.
    models: Mutex<Option<Vec<String>>>,
}

/// The server; it stops when dropped.
pub struct MockServer {
    address: std::net::SocketAddr,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer").field("address", &self.address).finish_non_exhaustive()
    }
}

impl MockServer {
    /// Listen on a free port of 127.0.0.1. `handler` gets the call's index (from 0, in the
    /// order requests arrive) and the request body.
    pub fn start(handler: impl Fn(usize, &Value) -> MockReply + Send + Sync + 'static) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let state = Arc::new(State::default());
        let handler: Arc<Handler> = Arc::new(handler);
        let accept = {
            let state = Arc::clone(&state);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if state.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (state, handler) = (Arc::clone(&state), Arc::clone(&handler));
                    std::thread::spawn(move || serve(stream, &state, handler.as_ref()));
                }
            })
        };
        Ok(MockServer { address, state, accept: Some(accept) })
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL a client is given.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// Every request received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Answer `GET /models` with these model IDs (an OpenAI-style list).
    pub fn list_models(&self, ids: &[&str]) {
        *self.state.models.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(ids.iter().map(|s| s.to_string()).collect());
    }

    /// The most requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.address);
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
        // An assertion that failed inside a handler fails the test that owns the server.
        let panics = self.state.panics.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if !panics.is_empty() && !std::thread::panicking() {
            panic!("the mock server's handler panicked: {}", panics.join("; "));
        }
    }
}

fn serve(stream: TcpStream, state: &State, handler: &Handler) {
    let Some(received) = read_request(&stream) else { return };
    if received.method == "GET" {
        let models = state.models.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let reply = match models {
            Some(ids) if received.path.ends_with("/models") => MockReply::Body(
                json!({"object": "list", "data": ids.iter().map(|id| json!({"id": id, "object": "model"})).collect::<Vec<_>>()})
                    .to_string(),
            ),
            _ => MockReply::status(404, "not found"),
        };
        return respond(stream, reply);
    }
    let call = state.calls.fetch_add(1, Ordering::SeqCst);
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(call, &received.body)));
    state.received.lock().unwrap_or_else(PoisonError::into_inner).push(received);
    let reply = reply.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a handler panicked".into());
        state.panics.lock().unwrap_or_else(PoisonError::into_inner).push(message);
        MockReply::status(500, "the mock's handler panicked")
    });
    // A delayed answer is in flight while it waits.
    let mut reply = reply;
    while let MockReply::Delay(wait, rest) = reply {
        std::thread::sleep(wait);
        reply = *rest;
    }
    // Out of flight before the answer leaves: once the client has read it, it may send its
    // next request, which a busy machine can schedule before this thread runs again (a
    // count taken after the write saw two in flight under a limit of one).
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    respond(stream, reply);
}

fn read_request(stream: &TcpStream) -> Option<Received> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let method = line.split_whitespace().next()?.to_string();
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        let (name, value) = trimmed.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Received { method, path, headers, body })
}

fn respond(mut stream: TcpStream, reply: MockReply) {
    let (code, headers, body) = match reply {
        MockReply::Delay(wait, rest) => {
            std::thread::sleep(wait);
            return respond(stream, *rest);
        }
        MockReply::Drop => {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        MockReply::Answer { text, input_tokens, output_tokens } => {
            let body = json!({
                "id": "mock", "object": "chat.completion", "model": "mock",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                          "total_tokens": input_tokens + output_tokens},
            });
            (200, Vec::new(), body.to_string())
        }
        MockReply::Status { code, headers, body } => (code, headers, body),
        MockReply::Body(body) => (200, Vec::new(), body),
    };
    let mut head = format!(
        "HTTP/1.1 {code} Mock\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes()));
    let _ = stream.flush();
}
