//! TLS on both listeners (`--tls-cert-file`, `--tls-key-file`): rustls with the ring
//! provider. The HTTP port speaks HTTP/1.1 and HTTP/2 (ALPN); the gRPC port is handed the
//! same certificate through tonic.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A client gets this long to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the server to take them.
const ACCEPTED_QUEUE: usize = 128;

/// The certificate chain and key, as PEM files.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// Both flags or neither; one alone is a mistake worth stopping for.
    pub fn from_flags(cert: Option<&Path>, key: Option<&Path>) -> anyhow::Result<Option<TlsFiles>> {
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles {
                cert: cert.to_path_buf(),
                key: key.to_path_buf(),
            })),
            (None, None) => Ok(None),
            _ => anyhow::bail!("--tls-cert-file and --tls-key-file go together: give both or neither"),
        }
    }

    pub fn read(&self) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
        let cert = std::fs::read(&self.cert).with_context(|| format!("reading {}", self.cert.display()))?;
        let key = std::fs::read(&self.key).with_context(|| format!("reading {}", self.key.display()))?;
        Ok((cert, key))
    }

    /// The rustls configuration of the HTTP port.
    pub fn server_config(&self) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let (cert_pem, key_pem) = self.read()?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("no PEM certificate in {}", self.cert.display()))?;
        anyhow::ensure!(!chain.is_empty(), "no certificate in {}", self.cert.display());
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .with_context(|| format!("no PEM private key in {}", self.key.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("tls protocol versions")?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .with_context(|| {
                format!(
                    "{} and {} are not a certificate and its key",
                    self.cert.display(),
                    self.key.display()
                )
            })?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A listener whose connections have finished their TLS handshake. Handshakes run on their
/// own tasks, so a slow or silent client holds up no one else.
pub struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, accepted) = mpsc::channel(ACCEPTED_QUEUE);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: wait rather than spin.
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "tls handshake failed"),
                        Err(_) => tracing::debug!(%peer, "tls handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { accepted, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accept loop only ends once this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
