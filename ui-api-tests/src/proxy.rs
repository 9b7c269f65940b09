//! A TCP proxy that a test can cut: while down it drops every open connection and resets
//! new ones, as a crashed or unreachable server does. It stands between stackhouse and
//! moto, which keeps its objects in memory: stopping moto itself would lose them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct Proxy {
    pub port: u16,
    up: Arc<AtomicBool>,
    /// Tells open connections to close when the proxy goes down.
    cut: watch::Sender<u64>,
    task: JoinHandle<()>,
}

impl Proxy {
    /// Forwards 127.0.0.1:<port> to `target` (`host:port`).
    pub async fn start(target: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy listener");
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, _) = watch::channel(0u64);
        let task = tokio::spawn({
            let (up, cut, target) = (up.clone(), cut.clone(), target.to_string());
            async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    if !up.load(Ordering::SeqCst) {
                        // Closed at once: the client reads an early EOF.
                        drop(client);
                        continue;
                    }
                    tokio::spawn(forward(client, target.clone(), cut.subscribe()));
                }
            }
        });
        Proxy { port, up, cut, task }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Cuts every connection and refuses new ones until [`Proxy::up`].
    pub fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    pub fn up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(mut client: TcpStream, target: String, mut cut: watch::Receiver<u64>) {
    let Ok(mut server) = TcpStream::connect(&target).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut.changed() => {}
    }
}
