//! TLS for a run: a certificate authority and a server certificate made
//! fresh for each run (rcgen, ECDSA P-256), written beside the run's other
//! files and mounted read-only into the server container, and the rustls
//! configurations a server and a client build from them. A client trusts
//! the run's CA alone, so a server that presents any other certificate
//! fails its handshake instead of being measured.
//!
//! Crypto: rustls with the ring provider (the one bollard's TLS already
//! brings, so the static binary carries one implementation).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::contract::Protocol;

/// The CA's certificate, in the directory [`RunCerts::write`] fills.
pub const CA_FILE: &str = "ca.pem";
/// The server's certificate chain (its own, then the CA's).
pub const CHAIN_FILE: &str = "server.pem";
/// The server's private key (PKCS#8).
pub const KEY_FILE: &str = "server.key";
/// What every key of a run is, as results record it.
pub const KEY_TYPE: &str = "ECDSA P-256, SHA-256 signatures";

/// A run's CA and the server certificate it signed, PEM.
#[derive(Clone)]
pub struct RunCerts {
    /// The CA certificate clients trust.
    pub ca_pem: String,
    /// The server's certificate followed by the CA's: what it presents.
    pub chain_pem: String,
    /// The server's private key.
    pub key_pem: String,
}

impl std::fmt::Debug for RunCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunCerts")
            .field("ca_pem", &self.ca_pem)
            .field("chain_pem", &self.chain_pem)
            .field("key_pem", &"(private)")
            .finish()
    }
}

/// Where [`RunCerts::write`] put the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// [`CA_FILE`].
    pub ca: PathBuf,
    /// [`CHAIN_FILE`].
    pub chain: PathBuf,
    /// [`KEY_FILE`].
    pub key: PathBuf,
}

impl RunCerts {
    /// A new CA, and a server certificate it signed for `names` (each a DNS
    /// name or an IP address, as the client will dial it).
    pub fn make(names: &[String]) -> anyhow::Result<RunCerts> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair, KeyUsagePurpose,
        };
        anyhow::ensure!(
            !names.is_empty(),
            "a server certificate needs at least one name"
        );
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "fairground run CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)
            .context("cannot make the run's CA certificate")?;
        let mut leaf = CertificateParams::new(names.to_vec())
            .with_context(|| format!("not a DNS name or an IP address: {names:?}"))?;
        leaf.distinguished_name
            .push(DnType::CommonName, names[0].as_str());
        leaf.use_authority_key_identifier_extension = true;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = leaf
            .signed_by(&key, &*ca)
            .context("cannot sign the server certificate")?;
        Ok(RunCerts {
            ca_pem: ca.pem(),
            chain_pem: format!("{}{}", cert.pem(), ca.pem()),
            key_pem: key.serialize_pem(),
        })
    }

    /// Write the three files into `dir` (created if missing). The key is a
    /// throwaway made for this run; the server container's unprivileged
    /// user must be able to read it through a read-only mount.
    pub fn write(&self, dir: &Path) -> anyhow::Result<CertFiles> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let files = CertFiles {
            ca: dir.join(CA_FILE),
            chain: dir.join(CHAIN_FILE),
            key: dir.join(KEY_FILE),
        };
        for (path, text) in [
            (&files.ca, &self.ca_pem),
            (&files.chain, &self.chain_pem),
            (&files.key, &self.key_pem),
        ] {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(files)
    }
}

/// The crypto provider every configuration here uses.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What a server offers under ALPN when it speaks `protocol`: `h2` first
/// and HTTP/1.1 for clients that ask for nothing else (as servers in
/// production do); HTTP/1.1 alone for https.
fn server_alpn(protocol: Protocol) -> Vec<Vec<u8>> {
    match protocol {
        Protocol::H2 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        _ => vec![b"http/1.1".to_vec()],
    }
}

/// A server configuration presenting `chain_pem` with `key_pem`.
pub fn server_config(
    chain_pem: &[u8],
    key_pem: &[u8],
    protocol: Protocol,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("the certificate chain is not PEM")?;
    anyhow::ensure!(!chain.is_empty(), "no certificate in the chain");
    let key = PrivateKeyDer::from_pem_slice(key_pem).context("the private key is not PEM")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the key does not match the certificate")?;
    config.alpn_protocols = server_alpn(protocol);
    Ok(Arc::new(config))
}

/// A server configuration from the files a run mounted.
pub fn server_config_from_files(
    chain: &Path,
    key: &Path,
    protocol: Protocol,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
    server_config(&read(chain)?, &read(key)?, protocol)
        .with_context(|| format!("{} with {}", chain.display(), key.display()))
}

/// A client configuration that trusts `ca_pem` alone, asks for `protocol`
/// under ALPN and never resumes a session: every connection made with it
/// does one full handshake, which is what the loader's handshake figure
/// says it measures (rustls' default would keep a session cache shared by
/// every connection of the configuration and resume from it).
pub fn client_config(
    ca_pem: &[u8],
    protocol: Protocol,
) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(cert.context("the CA certificate is not PEM")?)
            .context("the CA certificate is not one rustls accepts")?;
    }
    anyhow::ensure!(!roots.is_empty(), "no CA certificate to trust");
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    config.alpn_protocols = protocol
        .alpn()
        .map(|p| vec![p.to_vec()])
        .unwrap_or_default();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handshake between the two configurations over an in-memory pipe:
    /// the ALPN protocol agreed, or the client's error.
    async fn handshake(
        server: Arc<rustls::ServerConfig>,
        client: Arc<rustls::ClientConfig>,
        name: &str,
    ) -> Result<Option<Vec<u8>>, String> {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let acceptor = tokio_rustls::TlsAcceptor::from(server);
        let connector = tokio_rustls::TlsConnector::from(client);
        let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
        let (s, c) = tokio::join!(acceptor.accept(a), connector.connect(name, b));
        let c = c.map_err(|e| e.to_string())?;
        drop(s);
        Ok(c.get_ref().1.alpn_protocol().map(<[u8]>::to_vec))
    }

    #[tokio::test]
    async fn a_client_of_the_run_agrees_the_protocol_it_asks_for() {
        let certs = RunCerts::make(&["server".into(), "127.0.0.1".into()]).unwrap();
        let (chain, key, ca) = (
            certs.chain_pem.as_bytes(),
            certs.key_pem.as_bytes(),
            certs.ca_pem.as_bytes(),
        );
        for (protocol, agreed) in [
            (Protocol::H2, b"h2".as_slice()),
            (Protocol::Https, b"http/1.1".as_slice()),
        ] {
            let got = handshake(
                server_config(chain, key, protocol).unwrap(),
                client_config(ca, protocol).unwrap(),
                "server",
            )
            .await
            .unwrap();
            assert_eq!(got.as_deref(), Some(agreed), "{protocol}");
        }
        // An h2 client against a server that offers HTTP/1.1 alone: the
        // handshake holds and nothing is agreed, which the loader reports.
        let got = handshake(
            server_config(chain, key, Protocol::Https).unwrap(),
            client_config(ca, Protocol::H2).unwrap(),
            "server",
        )
        .await;
        assert!(
            !matches!(&got, Ok(Some(p)) if p == b"h2"),
            "h2 agreed with a server that never offered it: {got:?}"
        );
    }

    #[tokio::test]
    async fn a_certificate_from_another_ca_or_for_another_name_fails() {
        let ours = RunCerts::make(&["server".into()]).unwrap();
        let theirs = RunCerts::make(&["server".into()]).unwrap();
        let server = server_config(
            theirs.chain_pem.as_bytes(),
            theirs.key_pem.as_bytes(),
            Protocol::H2,
        )
        .unwrap();
        let client = client_config(ours.ca_pem.as_bytes(), Protocol::H2).unwrap();
        let err = handshake(server, client, "server").await.unwrap_err();
        assert!(err.contains("certificate"), "{err}");
        let server = server_config(
            ours.chain_pem.as_bytes(),
            ours.key_pem.as_bytes(),
            Protocol::H2,
        )
        .unwrap();
        let client = client_config(ours.ca_pem.as_bytes(), Protocol::H2).unwrap();
        let err = handshake(server, client, "elsewhere").await.unwrap_err();
        assert!(err.contains("certificate"), "{err}");
    }

    /// Two handshakes in a row with one client configuration, the second
    /// after the client has read what the server sent after the first (its
    /// TLS 1.3 session tickets): how the second handshake went.
    async fn second_handshake_kind(
        server: Arc<rustls::ServerConfig>,
        client: Arc<rustls::ClientConfig>,
    ) -> rustls::HandshakeKind {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let name = rustls::pki_types::ServerName::try_from("server").unwrap();
        let mut kind = None;
        for _ in 0..2 {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let acceptor = tokio_rustls::TlsAcceptor::from(server.clone());
            let connector = tokio_rustls::TlsConnector::from(client.clone());
            let (s, c) = tokio::join!(acceptor.accept(a), connector.connect(name.clone(), b));
            let (mut s, mut c) = (s.unwrap(), c.unwrap());
            kind = c.get_ref().1.handshake_kind();
            // The tickets travel after the handshake: one byte read brings
            // them in.
            s.write_all(b"x").await.unwrap();
            s.flush().await.unwrap();
            let mut byte = [0u8; 1];
            c.read_exact(&mut byte).await.unwrap();
        }
        kind.expect("the handshake finished")
    }

    #[tokio::test]
    async fn every_connection_of_a_client_does_a_full_handshake() {
        let certs = RunCerts::make(&["server".into()]).unwrap();
        let server = server_config(
            certs.chain_pem.as_bytes(),
            certs.key_pem.as_bytes(),
            Protocol::H2,
        )
        .unwrap();
        let client = client_config(certs.ca_pem.as_bytes(), Protocol::H2).unwrap();
        assert_eq!(
            second_handshake_kind(server.clone(), client.clone()).await,
            rustls::HandshakeKind::Full
        );
        // The same client with rustls' default session cache resumes: the
        // test can tell.
        let mut resuming = (*client).clone();
        resuming.resumption = rustls::client::Resumption::default();
        assert_eq!(
            second_handshake_kind(server, Arc::new(resuming)).await,
            rustls::HandshakeKind::Resumed
        );
    }

    #[test]
    fn files_round_trip_and_a_key_that_does_not_match_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let certs = RunCerts::make(&["server".into()]).unwrap();
        let files = certs.write(dir.path()).unwrap();
        server_config_from_files(&files.chain, &files.key, Protocol::H2).unwrap();
        let other = RunCerts::make(&["server".into()]).unwrap();
        std::fs::write(&files.key, &other.key_pem).unwrap();
        let err = server_config_from_files(&files.chain, &files.key, Protocol::H2).unwrap_err();
        assert!(format!("{err:#}").contains("does not match"), "{err:#}");
        assert!(!format!("{certs:?}").contains("PRIVATE KEY"));
    }
}
