//! The client side of TLS for `https` and `h2`: trust the CA given and
//! nothing else, verify the certificate for the name given (sent as SNI when
//! it is a DNS name), ask for the protocol's ALPN, and explain a failed
//! handshake so the report names the cause (a certificate that does not
//! verify, no ALPN protocol in common, not TLS at all).
//!
//! The configuration itself comes from `crate::tls::client_config`, which
//! the loader uses too, so verify and load trust and ask for the same.

use std::net::SocketAddr;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use crate::contract::Protocol;

use super::client::ClientError;
use super::report::TlsFacts;
use super::{VerifyError, VerifyTls};

/// How verify opens TLS to the server under test.
#[derive(Clone)]
pub(crate) struct TlsClient {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
    /// The name as given, for messages and the report.
    shown: String,
    protocol: Protocol,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("name", &self.shown)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl TlsClient {
    /// A client for `protocol` (https or h2) trusting `tls.ca_pem` alone.
    pub(crate) fn new(tls: &VerifyTls, protocol: Protocol) -> Result<TlsClient, VerifyError> {
        let config =
            crate::tls::client_config(&tls.ca_pem, protocol).map_err(|e| VerifyError::Tls {
                protocol,
                why: format!("the CA given cannot be trusted: {e:#}"),
            })?;
        let name = ServerName::try_from(tls.name.clone()).map_err(|_| VerifyError::Tls {
            protocol,
            why: format!(
                "`{}` is neither a DNS name nor an IP address, so no certificate can carry it",
                tls.name
            ),
        })?;
        Ok(TlsClient {
            connector: tokio_rustls::TlsConnector::from(config),
            name,
            shown: tls.name.clone(),
            protocol,
        })
    }

    /// The TLS handshake over `tcp`, finished before `deadline` (`after`
    /// is the timeout that deadline stands for, for the message).
    pub(crate) async fn handshake(
        &self,
        tcp: TcpStream,
        addr: SocketAddr,
        deadline: Instant,
        after: Duration,
    ) -> Result<TlsStream<TcpStream>, ClientError> {
        let handshake = self.connector.connect(self.name.clone(), tcp);
        match tokio::time::timeout_at(deadline, handshake).await {
            Err(_) => Err(ClientError::Timeout {
                after,
                what: format!("the TLS handshake with {addr}"),
            }),
            Ok(Err(e)) => Err(ClientError::Tls {
                addr,
                why: self.explain(&e),
            }),
            Ok(Ok(stream)) => Ok(stream),
        }
    }

    /// What a completed handshake agreed.
    pub(crate) fn facts(&self, stream: &TlsStream<TcpStream>) -> TlsFacts {
        let conn = stream.get_ref().1;
        TlsFacts {
            version: conn
                .protocol_version()
                .map_or("unknown".into(), version_name),
            cipher_suite: conn
                .negotiated_cipher_suite()
                .map_or("unknown".into(), |s| format!("{:?}", s.suite())),
            alpn: conn
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            server_name: self.shown.clone(),
        }
    }

    /// Why a handshake failed, in words that name the cause.
    fn explain(&self, e: &std::io::Error) -> String {
        let Some(err) = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        else {
            return match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    "the server closed the connection during the handshake".into()
                }
                _ => e.to_string(),
            };
        };
        use rustls::CertificateError as C;
        match err {
            rustls::Error::InvalidCertificate(cause) => {
                let what = match cause {
                    // BadSignature: a CA of the same name, whose key did
                    // not sign it.
                    C::UnknownIssuer | C::BadSignature => "was not signed by the CA given",
                    C::NotValidForName | C::NotValidForNameContext { .. } => {
                        "does not carry that name"
                    }
                    C::Expired | C::ExpiredContext { .. } => "has expired",
                    C::NotValidYet | C::NotValidYetContext { .. } => "is not valid yet",
                    _ => "is not accepted",
                };
                format!(
                    "the server's certificate does not verify for `{}` against the CA given: it \
                     {what} ({err})",
                    self.shown
                )
            }
            rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol) => {
                format!(
                    "the server agreed none of the ALPN protocols asked ({}): {err}",
                    self.alpn_asked()
                )
            }
            rustls::Error::AlertReceived(rustls::AlertDescription::BadCertificate)
            | rustls::Error::AlertReceived(rustls::AlertDescription::UnknownCA) => {
                format!("the server rejected the handshake over a certificate: {err}")
            }
            rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
                format!("{err} (does the server speak TLS on this port?)")
            }
            _ => err.to_string(),
        }
    }

    /// The ALPN protocol asked, for messages.
    fn alpn_asked(&self) -> String {
        self.protocol
            .alpn()
            .map_or("none".into(), |p| String::from_utf8_lossy(p).into_owned())
    }
}

/// Whether what ALPN agreed lets `protocol` be spoken: exactly `h2` for h2
/// (anything else fails, naming what was agreed: verify never falls back to
/// HTTP/1.1); `http/1.1`, or nothing from a server that ignores ALPN
/// (HTTP/1.1 is then what TLS carries), for https.
pub(crate) fn alpn_fits(protocol: Protocol, agreed: Option<&[u8]>) -> Result<(), String> {
    let shown = || {
        agreed.map_or("nothing".into(), |p| {
            format!("`{}`", String::from_utf8_lossy(p))
        })
    };
    match (protocol, agreed) {
        (Protocol::H2, Some(b"h2")) => Ok(()),
        (Protocol::H2, _) => Err(format!(
            "ALPN agreed {}, but h2 was asked: the server does not offer HTTP/2 over TLS here, \
             and verify never falls back to HTTP/1.1",
            shown()
        )),
        (Protocol::Https, None | Some(b"http/1.1")) => Ok(()),
        (Protocol::Https, _) => Err(format!("ALPN agreed {}, but http/1.1 was asked", shown())),
        (Protocol::Http1 | Protocol::H2c, _) => Ok(()),
    }
}

/// `TLS 1.3` for `TLSv1_3`.
fn version_name(v: rustls::ProtocolVersion) -> String {
    match v {
        rustls::ProtocolVersion::TLSv1_2 => "TLS 1.2".into(),
        rustls::ProtocolVersion::TLSv1_3 => "TLS 1.3".into(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h2_needs_exactly_h2_and_https_accepts_http11_or_nothing() {
        assert!(alpn_fits(Protocol::H2, Some(b"h2")).is_ok());
        let err = alpn_fits(Protocol::H2, Some(b"http/1.1")).unwrap_err();
        assert!(
            err.starts_with("ALPN agreed `http/1.1`, but h2 was asked"),
            "{err}"
        );
        let err = alpn_fits(Protocol::H2, None).unwrap_err();
        assert!(
            err.starts_with("ALPN agreed nothing, but h2 was asked"),
            "{err}"
        );
        assert!(alpn_fits(Protocol::Https, Some(b"http/1.1")).is_ok());
        assert!(alpn_fits(Protocol::Https, None).is_ok());
        assert!(alpn_fits(Protocol::Https, Some(b"h2")).is_err());
    }

    #[test]
    fn a_bad_ca_or_name_is_bad_input() {
        let tls = VerifyTls {
            ca_pem: b"not a certificate".to_vec(),
            name: "localhost".into(),
        };
        let err = TlsClient::new(&tls, Protocol::H2).unwrap_err();
        assert!(
            err.to_string().contains("the CA given cannot be trusted"),
            "{err}"
        );
        let certs = crate::tls::RunCerts::make(&["localhost".into()]).unwrap();
        let tls = VerifyTls {
            ca_pem: certs.ca_pem.into_bytes(),
            name: "not a name!".into(),
        };
        let err = TlsClient::new(&tls, Protocol::Https).unwrap_err();
        assert!(err.to_string().contains("neither a DNS name"), "{err}");
    }
}
