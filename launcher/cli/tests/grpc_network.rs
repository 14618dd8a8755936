//! Who may connect over TCP (issue 45), against a real `splitprover run` (CPU backend, built-in
//! circuit): a peer outside `[service] allow` is closed at accept, logged and counted, one
//! inside proves; with `[service] tls` naming a client CA, a client without a certificate is
//! refused and one with a certificate proves, through the library client and the CLI. Every
//! connection goes to 127.0.0.1; the test certificates are made here (rcgen), never committed.

mod common;
mod service_common;
use common::free_port;
use service_common::{serial, Setup};

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use launcher::api::access::ClientTls;
use launcher::api::client::Client;
use launcher::api::{pb, Endpoint, DEFAULT_MAX_MESSAGE_BYTES};
use pb::await_proof_response::Status as S;

const CIRCUIT: &str = "sha-chain:1";

/// HTTP/2's client connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn builtin(seed: u64) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        circuit: CIRCUIT.into(),
        request: kernels::job::BuiltinRequest {
            seed,
            partitions: 1,
        }
        .to_bytes(),
        ..Default::default()
    }
}

/// Proves `seed` through `c` and checks the proof with the test's own verifier.
fn proves(c: &mut Client, seed: u64) {
    let req = builtin(seed);
    let a = c.prove(req.clone()).unwrap();
    assert_eq!(a.status, S::Completed as i32, "{a:?}");
    common::verify::builtin_proof(&req.circuit, &req.request, &a.proof);
}

/// Connects to `port` on 127.0.0.1 from `source`, sends HTTP/2's preface, and returns what the
/// server answers before it closes or goes quiet for a second.
fn raw_answer(source: [u8; 4], port: u16) -> Vec<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(std::net::SocketAddr::from((source, 0)))
            .unwrap();
        let mut s = socket
            .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .unwrap();
        // A refused peer may be closed before the write lands: that is an answer too.
        let _ = s.write_all(PREFACE).await;
        let mut got = vec![0u8; 256];
        match tokio::time::timeout(Duration::from_secs(1), s.read(&mut got)).await {
            Ok(Ok(n)) => got[..n].to_vec(),
            Ok(Err(_)) | Err(_) => Vec::new(),
        }
    })
}

fn metrics_of(socket: &Path) -> String {
    Client::connect(&Endpoint::Unix(socket.to_owned()))
        .unwrap()
        .metrics()
        .unwrap()
}

#[test]
fn a_peer_outside_the_allow_list_is_closed_at_accept_and_one_inside_proves() {
    let _g = serial();
    let port = free_port();
    let mut setup = Setup::new(
        CIRCUIT,
        &format!("listen = [\"127.0.0.1:{port}\"]\nallow = [\"127.0.0.1/32\"]"),
    );
    let s = setup.start();
    let tcp = Endpoint::Tcp(format!("127.0.0.1:{port}"));

    // Inside (127.0.0.1): the server answers the preface with its SETTINGS, and proves.
    let inside = raw_answer([127, 0, 0, 1], port);
    assert!(!inside.is_empty(), "an allowed peer got no HTTP/2 answer");
    proves(&mut Client::connect(&tcp).unwrap(), 1);

    // Outside (127.0.0.2, not in the list): closed without a byte, logged, counted.
    for _ in 0..3 {
        assert_eq!(raw_answer([127, 0, 0, 2], port), Vec::<u8>::new());
    }
    let m = metrics_of(&s.socket);
    assert!(
        m.contains("splitprover_connections_refused_total{reason=\"not_allowed\"} 3\n"),
        "{m}"
    );
    let log = s.log_text();
    assert!(
        log.contains("connection refused: peer not in [service] allow")
            && log.contains("127.0.0.2"),
        "{log}"
    );

    // The Unix socket is not concerned: its mode and group decide.
    proves(
        &mut Client::connect(&Endpoint::Unix(s.socket.clone())).unwrap(),
        2,
    );
}

#[test]
fn the_default_allow_list_admits_loopback_and_a_bad_network_stops_the_start() {
    let _g = serial();
    let port = free_port();
    let mut setup = Setup::new(CIRCUIT, &format!("listen = [\"127.0.0.1:{port}\"]"));
    let s = setup.start();
    proves(
        &mut Client::connect(&Endpoint::Tcp(format!("127.0.0.1:{port}"))).unwrap(),
        3,
    );
    // 127.0.0.2 is loopback too: admitted by default.
    assert!(!raw_answer([127, 0, 0, 2], port).is_empty());
    drop(s);

    let mut bad = Setup::new(CIRCUIT, "allow = [\"10.0.0.0/33\"]");
    let mut s = bad.spawn();
    let status = s.wait_exit(Duration::from_secs(60)).expect("it stops");
    assert!(!status.success());
    let log = s.log_text();
    assert!(log.contains("bad network `10.0.0.0/33`"), "{log}");
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files in `dir`.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    /// A client certificate signed by another CA.
    stranger_cert: PathBuf,
    stranger_key: PathBuf,
}

fn pki(dir: &Path) -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa,
        KeyPair,
    };
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let ca_of = |name: &str| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
    };
    let ca = ca_of("splitprover test CA");
    let other_ca = ca_of("another CA");
    let leaf = |names: Vec<String>,
                usage: ExtendedKeyUsagePurpose,
                issuer: &CertifiedIssuer<'_, KeyPair>| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (sc, sk) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        ExtendedKeyUsagePurpose::ServerAuth,
        &ca,
    );
    let (cc, ck) = leaf(
        vec!["client".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
        &ca,
    );
    let (oc, ok) = leaf(
        vec!["stranger".into()],
        ExtendedKeyUsagePurpose::ClientAuth,
        &other_ca,
    );
    Pki {
        ca: write("ca.pem", ca.pem()),
        server_cert: write("server.pem", sc),
        server_key: write("server.key", sk),
        client_cert: write("client.pem", cc),
        client_key: write("client.key", ck),
        stranger_cert: write("stranger.pem", oc),
        stranger_key: write("stranger.key", ok),
    }
}

#[test]
fn with_tls_required_a_client_without_a_certificate_is_refused_and_one_with_proves() {
    let _g = serial();
    let port = free_port();
    let certs = tempfile::tempdir().unwrap();
    let p = pki(certs.path());
    let mut setup = Setup::new(
        CIRCUIT,
        &format!(
            "listen = [\"127.0.0.1:{port}\"]\ntls = {{ cert = {:?}, key = {:?}, client_ca = {:?} }}",
            p.server_cert, p.server_key, p.ca
        ),
    );
    let s = setup.start();
    let tcp = Endpoint::Tcp(format!("127.0.0.1:{port}"));
    let connect = |tls: ClientTls| {
        Client::connect_with(&tcp, DEFAULT_MAX_MESSAGE_BYTES, &tls)
            .and_then(|mut c| c.status().map(|_| c))
    };

    // With the CA and a certificate it signed: proves.
    let good = ClientTls {
        ca: Some(p.ca.clone()),
        cert: Some(p.client_cert.clone()),
        key: Some(p.client_key.clone()),
        domain: None,
    };
    proves(&mut connect(good.clone()).unwrap(), 4);

    // Refused: no certificate; a certificate of another CA; plain text (Curio's client).
    let no_cert = ClientTls {
        cert: None,
        key: None,
        ..good.clone()
    };
    let stranger = ClientTls {
        cert: Some(p.stranger_cert.clone()),
        key: Some(p.stranger_key.clone()),
        ..good.clone()
    };
    for (what, tls) in [
        ("no client certificate", no_cert),
        ("another CA's certificate", stranger),
        ("plain text", ClientTls::default()),
    ] {
        assert!(connect(tls).is_err(), "{what}: served");
    }

    // The CLI's client speaks TLS with --tls-ca/--tls-cert/--tls-key.
    let status = |extra: &[&Path]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_splitprover"));
        cmd.args(["status", "--socket", &format!("127.0.0.1:{port}")]);
        for (flag, path) in ["--tls-ca", "--tls-cert", "--tls-key"].iter().zip(extra) {
            cmd.arg(flag).arg(path);
        }
        cmd.env_remove("SPLITPROVER_SOCKET").output().unwrap()
    };
    let out = status(&[&p.ca, &p.client_cert, &p.client_key]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("gpu-proc[0]"),
        "{text}"
    );
    let out = status(&[&p.ca]);
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The Unix socket stays plain.
    proves(
        &mut Client::connect(&Endpoint::Unix(s.socket.clone())).unwrap(),
        5,
    );
}

#[test]
fn a_silent_connection_is_closed_after_the_deadline() {
    let _g = serial();
    let port = free_port();
    let mut setup = Setup::new(
        CIRCUIT,
        &format!("listen = [\"127.0.0.1:{port}\"]\nfirst_byte_timeout_s = 1"),
    );
    let s = setup.start();
    let mut quiet = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    quiet
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    // The server may have sent its SETTINGS before giving up: read to the close.
    loop {
        match quiet.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
    let _ = quiet.write_all(PREFACE);
    let m = metrics_of(&s.socket);
    assert!(
        m.contains("splitprover_connections_refused_total{reason=\"silent\"} 1\n"),
        "{m}"
    );
}
