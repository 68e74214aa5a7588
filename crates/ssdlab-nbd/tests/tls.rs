//! TLS (STARTTLS with certificates and with pre-shared keys, `--tls=require`, bad credential
//! files, the refusal of plain text off loopback) and the persistent image, against a scripted
//! client over a real Unix socket. Certificates are made at test time with OpenSSL.

mod common;

use common::*;
use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::ssl::{SslConnector, SslMethod, SslStream, SslVerifyMode};
use openssl::x509::extension::{BasicConstraints, ExtendedKeyUsage, SubjectAlternativeName};
use openssl::x509::{X509NameBuilder, X509};
use ssdlab_nbd::protocol::*;
use ssdlab_nbd::{Endpoint, ServeError, Server, ServerOptions, TlsMode, TlsOptions};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

// -- credentials ---------------------------------------------------------------------------------

fn ec_key() -> PKey<Private> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap()
}

fn certificate(
    subject: &str,
    key: &PKey<Private>,
    issuer: Option<(&X509, &PKey<Private>)>,
) -> X509 {
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", subject).unwrap();
    let name = name.build();
    let mut b = X509::builder().unwrap();
    b.set_version(2).unwrap();
    let mut serial = BigNum::new().unwrap();
    serial.rand(64, MsbOption::MAYBE_ZERO, false).unwrap();
    b.set_serial_number(&serial.to_asn1_integer().unwrap())
        .unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_pubkey(key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&Asn1Time::days_from_now(2).unwrap())
        .unwrap();
    match issuer {
        None => {
            b.set_issuer_name(&name).unwrap();
            b.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
                .unwrap();
            b.sign(key, MessageDigest::sha256()).unwrap();
        }
        Some((ca, ca_key)) => {
            b.set_issuer_name(ca.subject_name()).unwrap();
            let san = SubjectAlternativeName::new()
                .dns("localhost")
                .ip("127.0.0.1")
                .build(&b.x509v3_context(Some(ca), None))
                .unwrap();
            b.append_extension(san).unwrap();
            b.append_extension(ExtendedKeyUsage::new().server_auth().build().unwrap())
                .unwrap();
            b.sign(ca_key, MessageDigest::sha256()).unwrap();
        }
    }
    b.build()
}

/// `ca-cert.pem`, `server-cert.pem` and `server-key.pem` in `dir` (qemu's and libnbd's layout).
fn make_certificates(dir: &Path) {
    let ca_key = ec_key();
    let ca = certificate("ssdlab test CA", &ca_key, None);
    let key = ec_key();
    let cert = certificate("localhost", &key, Some((&ca, &ca_key)));
    std::fs::write(dir.join("ca-cert.pem"), ca.to_pem().unwrap()).unwrap();
    std::fs::write(dir.join("server-cert.pem"), cert.to_pem().unwrap()).unwrap();
    std::fs::write(
        dir.join("server-key.pem"),
        key.private_key_to_pem_pkcs8().unwrap(),
    )
    .unwrap();
}

const PSK_KEY: [u8; 16] = *b"0123456789abcdef";

fn x509_options(dir: &Path, mode: Option<TlsMode>) -> TlsOptions {
    TlsOptions {
        mode,
        cert: Some(dir.join("server-cert.pem")),
        key: Some(dir.join("server-key.pem")),
        psk: None,
    }
}

// -- a generic client ----------------------------------------------------------------------------

fn greet<S: Read + Write>(s: &mut S) {
    let mut g = [0u8; 18];
    s.read_exact(&mut g).expect("greeting");
    assert_eq!(&g[0..8], b"NBDMAGIC");
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
}

fn send_option<S: Write>(s: &mut S, option: u32, data: &[u8]) {
    let mut b = Vec::new();
    b.extend_from_slice(&IHAVEOPT.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

fn option_reply<S: Read>(s: &mut S) -> (u32, u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).expect("option reply");
    assert_eq!(
        u64::from_be_bytes(h[0..8].try_into().unwrap()),
        OPTION_REPLY_MAGIC
    );
    let option = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
    let mut data = vec![0u8; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
    s.read_exact(&mut data).unwrap();
    (option, kind, data)
}

/// NBD_OPT_GO for the default export; its transmission flags.
fn go<S: Read + Write>(s: &mut S) -> u16 {
    send_option(s, OPT_GO, &info_payload("", &[]));
    let mut flags = 0;
    loop {
        let (option, kind, data) = option_reply(s);
        assert_eq!(option, OPT_GO);
        match kind {
            REP_INFO if data[0..2] == INFO_EXPORT.to_be_bytes() => {
                flags = u16::from_be_bytes([data[10], data[11]]);
            }
            REP_INFO => {}
            REP_ACK => return flags,
            other => panic!("GO answered {other:#x}"),
        }
    }
}

fn request<S: Read + Write>(
    s: &mut S,
    command: Command,
    flags: u16,
    offset: u64,
    payload: &[u8],
    read_len: usize,
) -> (u32, Vec<u8>) {
    let length = if command == Command::Read {
        read_len
    } else {
        payload.len()
    };
    let h = RequestHeader {
        flags,
        command,
        cookie: 77,
        offset,
        length: length as u32,
    };
    let mut b = h.encode().to_vec();
    b.extend_from_slice(payload);
    s.write_all(&b).unwrap();
    let mut r = [0u8; 16];
    s.read_exact(&mut r).expect("reply");
    assert_eq!(
        u32::from_be_bytes(r[0..4].try_into().unwrap()),
        SIMPLE_REPLY_MAGIC
    );
    let error = u32::from_be_bytes(r[4..8].try_into().unwrap());
    let mut data = vec![0u8; if error == 0 { read_len } else { 0 }];
    s.read_exact(&mut data).unwrap();
    (error, data)
}

fn starttls(s: &mut UnixStream) {
    send_option(s, OPT_STARTTLS, &[]);
    assert_eq!(option_reply(s), (OPT_STARTTLS, REP_ACK, vec![]));
}

fn x509_client(s: UnixStream, ca: &Path) -> SslStream<UnixStream> {
    let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
    b.set_ca_file(ca).unwrap();
    b.build().connect("localhost", s).expect("TLS handshake")
}

/// Write, flush and read back inside TLS; the device sees the bytes.
fn exercise<S: Read + Write>(s: &mut S) {
    let data = pattern(3, 64 << 10);
    assert_eq!(request(s, Command::Write, 0, 8192, &data, 0).0, 0);
    assert_eq!(request(s, Command::Flush, 0, 0, &[], 0).0, 0);
    let (error, back) = request(s, Command::Read, 0, 8192, &[], data.len());
    assert_eq!(error, 0);
    assert!(back == data, "read back differs");
    // Several requests in flight, so that replies are held while new records arrive.
    let mut batch = Vec::new();
    for i in 0..8u64 {
        let h = RequestHeader {
            flags: 0,
            command: Command::Read,
            cookie: i,
            offset: 8192,
            length: 4096,
        };
        batch.extend_from_slice(&h.encode());
    }
    s.write_all(&batch).unwrap();
    for _ in 0..8 {
        let mut r = [0u8; 16 + 4096];
        s.read_exact(&mut r).unwrap();
        assert_eq!(&r[4..8], &[0, 0, 0, 0]);
        assert!(r[16..] == data[..4096]);
    }
    s.write_all(
        &RequestHeader {
            flags: 0,
            command: Command::Disconnect,
            cookie: 0,
            offset: 0,
            length: 0,
        }
        .encode(),
    )
    .unwrap();
}

// -- TLS -----------------------------------------------------------------------------------------

#[test]
fn starttls_with_a_certificate_in_both_clocks() {
    let dir = TempDir::new("certs-x509");
    make_certificates(&dir.0);
    for clock in ["virtual", "realtime"] {
        let server = start(&format!("tls-x509-{clock}"), clock, |o| {
            o.tls = x509_options(&dir.0, None);
        });
        let mut s = connect_raw(&server.socket);
        greet(&mut s);
        starttls(&mut s);
        let mut t = x509_client(s, &dir.0.join("ca-cert.pem"));
        // Negotiation goes on inside TLS: a second STARTTLS is invalid.
        send_option(&mut t, OPT_STARTTLS, &[]);
        assert_eq!(option_reply(&mut t).1, REP_ERR_INVALID);
        go(&mut t);
        exercise(&mut t);
        let summary = server.finish();
        assert_eq!(summary["emulator"]["tls"]["mode"], "require");
        assert_eq!(summary["emulator"]["tls"]["credentials"], "x509");
        assert_eq!(summary["emulator"]["protocol_errors"], 0, "{clock}");
        assert_eq!(summary["jobs"][0]["write"]["total_ios"], 1, "{clock}");
    }
}

#[test]
fn require_refuses_options_before_starttls() {
    let dir = TempDir::new("certs-require");
    make_certificates(&dir.0);
    let server = start("tls-require", "virtual", |o| {
        o.tls = x509_options(&dir.0, Some(TlsMode::Require));
    });
    let mut s = connect_raw(&server.socket);
    greet(&mut s);
    for option in [OPT_LIST, OPT_INFO, OPT_GO, OPT_STRUCTURED_REPLY, 42] {
        let data = if option == OPT_INFO || option == OPT_GO {
            info_payload("", &[])
        } else {
            vec![]
        };
        send_option(&mut s, option, &data);
        assert_eq!(option_reply(&mut s), (option, REP_ERR_TLS_REQD, vec![]));
    }
    send_option(&mut s, OPT_STARTTLS, b"x");
    assert_eq!(option_reply(&mut s).1, REP_ERR_INVALID);
    // EXPORT_NAME cannot be refused with an error: the server hangs up.
    send_option(&mut s, OPT_EXPORT_NAME, b"");
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "no export before TLS: {rest:?}");

    // ABORT is allowed in plain text.
    let mut s = connect_raw(&server.socket);
    greet(&mut s);
    send_option(&mut s, OPT_ABORT, &[]);
    assert_eq!(option_reply(&mut s).1, REP_ACK);

    // A client that sends garbage instead of a TLS handshake is dropped; the server goes on.
    let mut s = connect_raw(&server.socket);
    greet(&mut s);
    starttls(&mut s);
    s.write_all(b"this is not a TLS ClientHello, not at all")
        .unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);

    let mut s = connect_raw(&server.socket);
    greet(&mut s);
    starttls(&mut s);
    let mut t = x509_client(s, &dir.0.join("ca-cert.pem"));
    go(&mut t);
    exercise(&mut t);
    let summary = server.finish();
    assert_eq!(summary["emulator"]["protocol_errors"], 1);
}

#[test]
fn tls_on_lets_plain_clients_in_and_off_refuses_starttls() {
    let dir = TempDir::new("certs-on");
    make_certificates(&dir.0);
    let server = start("tls-on", "virtual", |o| {
        o.tls = x509_options(&dir.0, Some(TlsMode::On));
    });
    let mut s = connect_raw(&server.socket);
    greet(&mut s);
    go(&mut s);
    exercise(&mut s);
    let mut s = connect_raw(&server.socket);
    greet(&mut s);
    starttls(&mut s);
    let mut t = x509_client(s, &dir.0.join("ca-cert.pem"));
    go(&mut t);
    exercise(&mut t);
    server.finish();

    let server = start("tls-off", "virtual", |_| {});
    let mut s = connect_raw(&server.socket);
    greet(&mut s);
    send_option(&mut s, OPT_STARTTLS, &[]);
    assert_eq!(option_reply(&mut s).1, REP_ERR_UNSUP);
    server.finish();
}

#[test]
fn starttls_with_a_pre_shared_key() {
    let dir = TempDir::new("certs-psk");
    let psk = dir.0.join("keys.psk");
    let hex: String = PSK_KEY.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(&psk, format!("other:00ff\nalice:{hex}\n")).unwrap();
    let server = start("tls-psk", "realtime", |o| {
        o.tls.psk = Some(psk.clone());
    });
    let connect = |identity: &'static [u8], key: [u8; 16]| {
        let mut s = connect_raw(&server.socket);
        greet(&mut s);
        starttls(&mut s);
        let mut b = SslConnector::builder(SslMethod::tls_client()).unwrap();
        b.set_verify(SslVerifyMode::NONE);
        b.set_psk_client_callback(move |_, _hint, id, out| {
            id[..identity.len()].copy_from_slice(identity);
            id[identity.len()] = 0;
            out[..key.len()].copy_from_slice(&key);
            Ok(key.len())
        });
        b.build()
            .configure()
            .unwrap()
            .verify_hostname(false)
            .connect("localhost", s)
    };
    let mut t = connect(b"alice", PSK_KEY).expect("PSK handshake");
    go(&mut t);
    exercise(&mut t);
    assert!(
        connect(b"alice", *b"fedcba9876543210").is_err(),
        "wrong key"
    );
    assert!(connect(b"mallory", PSK_KEY).is_err(), "unknown user");
    let summary = server.finish();
    assert_eq!(summary["emulator"]["tls"]["credentials"], "psk");
    assert_eq!(summary["jobs"][0]["write"]["total_ios"], 1);
}

fn bind_error(configure: impl FnOnce(&mut ServerOptions)) -> String {
    let dir = TempDir::new("certs-bind");
    let mut options = ServerOptions::new(Endpoint::Unix(dir.0.join("nbd.sock")));
    configure(&mut options);
    match Server::bind(tiny_device("slc"), &options) {
        Ok(_) => panic!("bind succeeded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_credential_files_are_errors_that_name_the_file() {
    let dir = TempDir::new("certs-bad");
    make_certificates(&dir.0);
    let junk = dir.0.join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let other_key = dir.0.join("other-key.pem");
    std::fs::write(&other_key, ec_key().private_key_to_pem_pkcs8().unwrap()).unwrap();
    let shown = |p: &PathBuf| p.display().to_string();

    let err = bind_error(|o| {
        o.tls = x509_options(&dir.0, None);
        o.tls.cert = Some(junk.clone());
    });
    assert!(
        err.starts_with(&format!("{}: no PEM certificate", shown(&junk))),
        "{err}"
    );
    let err = bind_error(|o| {
        o.tls = x509_options(&dir.0, None);
        o.tls.key = Some(junk.clone());
    });
    assert!(
        err.starts_with(&format!("{}: no PEM private key", shown(&junk))),
        "{err}"
    );
    let err = bind_error(|o| {
        o.tls = x509_options(&dir.0, None);
        o.tls.key = Some(other_key.clone());
    });
    assert!(
        err.starts_with(&format!(
            "{}: the private key does not belong",
            shown(&other_key)
        )),
        "{err}"
    );
    let missing = dir.0.join("missing.pem");
    let err = bind_error(|o| {
        o.tls = x509_options(&dir.0, None);
        o.tls.cert = Some(missing.clone());
    });
    assert!(err.starts_with(&shown(&missing)), "{err}");
    let err = bind_error(|o| o.tls.psk = Some(junk.clone()));
    assert!(
        err.starts_with(&format!("{}: line 1: no ':'", shown(&junk))),
        "{err}"
    );
    let err = bind_error(|o| o.tls.mode = Some(TlsMode::Require));
    assert!(err.contains("needs credentials"), "{err}");
}

#[test]
fn plain_text_off_loopback_needs_insecure() {
    // Refused before anything is bound, so no socket is ever opened off loopback here.
    let options = ServerOptions::new(Endpoint::Tcp("0.0.0.0:0".parse().unwrap()));
    let err = Server::bind(tiny_device("slc"), &options).err().unwrap();
    assert!(matches!(err, ServeError::Insecure(_)));
    assert!(err.to_string().contains("--insecure"), "{err}");
    let mut on = options.clone();
    on.tls = TlsOptions {
        mode: Some(TlsMode::On),
        psk: Some("/nonexistent".into()),
        ..TlsOptions::default()
    };
    // TLS that plain clients may skip is not enough either (the PSK file is read first).
    assert!(Server::bind(tiny_device("slc"), &on).is_err());
    // Loopback needs nothing.
    let loopback = ServerOptions::new(Endpoint::Tcp("127.0.0.1:0".parse().unwrap()));
    let server = Server::bind(tiny_device("slc"), &loopback).expect("loopback");
    assert!(server.uri().starts_with("nbd://127.0.0.1:"));
}

// -- persistent image ----------------------------------------------------------------------------

#[test]
fn the_image_keeps_the_export_across_restarts() {
    let dir = TempDir::new("image");
    let image = dir.0.join("export.img");
    let data = pattern(9, 128 << 10);
    let server = start("image-1", "virtual", |o| o.image = Some(image.clone()));
    let mut c = Client::connect(&server.socket);
    assert_eq!(c.write(1 << 20, &data), 0);
    assert_eq!(c.write(4096, &data[..4096]), 0);
    // A trimmed page reads back as zeros after the restart, and stays a hole.
    assert_eq!(c.command(Command::Trim, 0, 4096, 4096), 0);
    // FUA: durable now; the rest is synced at shutdown.
    c.send(
        Command::Write,
        CMD_FLAG_FUA,
        5,
        3 << 20,
        4096,
        &data[..4096],
    );
    assert_eq!(c.reply(None).error, 0);
    c.disconnect();
    let summary = server.finish();
    assert!(summary["emulator"]["image"]["syncs"].as_u64().unwrap() >= 2);
    let size = tiny_device("slc").logical_bytes();
    assert_eq!(std::fs::metadata(&image).unwrap().len(), size);

    let server = start("image-2", "virtual", |o| o.image = Some(image.clone()));
    let mut c = Client::connect(&server.socket);
    assert!(c.read(1 << 20, data.len()).unwrap() == data);
    assert!(c.read(3 << 20, 4096).unwrap() == data[..4096]);
    assert!(c.read(4096, 4096).unwrap().iter().all(|&b| b == 0));
    assert!(c.read(0, 4096).unwrap().iter().all(|&b| b == 0));
    c.disconnect();
    let summary = server.finish();
    assert_eq!(
        summary["emulator"]["image"]["loaded_bytes"],
        data.len() as u64 + 4096
    );
    // The fill is not part of what was served.
    assert_eq!(summary["jobs"][0]["write"]["total_ios"], 0);

    // Another geometry has another size: a clear error, not a silent truncation.
    let mut big = tiny_device("slc").config().clone();
    big.geometry.blocks_per_plane *= 2;
    let device = ssdlab_core::Device::new(big, 7, true);
    let options = {
        let mut o = ServerOptions::new(Endpoint::Unix(dir.0.join("other.sock")));
        o.image = Some(image.clone());
        o
    };
    let err = Server::bind(device, &options).err().unwrap().to_string();
    assert!(err.contains("but the export is"), "{err}");
}

// -- property: nothing before STARTTLS -----------------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;
    use ssdlab_nbd::clock;
    use ssdlab_nbd::emulator::Emulator;
    use ssdlab_nbd::handshake::ExportInfo;
    use ssdlab_nbd::server::serve_stream_tls;
    use ssdlab_nbd::tls::TlsConfig;
    use ssdlab_nbd::transport::MemoryTransport;
    use std::sync::OnceLock;

    /// One PSK-only TLS configuration (`require`) for every case: loading it per case would
    /// dominate the run time.
    fn tls() -> &'static TlsConfig {
        static TLS: OnceLock<TlsConfig> = OnceLock::new();
        TLS.get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("ssdlab-tls-props-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("keys.psk");
            std::fs::write(&path, "alice:000102030405060708090a0b0c0d0e0f\n").unwrap();
            let options = TlsOptions {
                psk: Some(path),
                ..TlsOptions::default()
            };
            let config = TlsConfig::load(&options).unwrap().unwrap();
            let _ = std::fs::remove_dir_all(&dir);
            config
        })
    }

    fn option() -> impl Strategy<Value = (u32, Vec<u8>)> {
        let code = prop_oneof![
            Just(OPT_EXPORT_NAME),
            Just(OPT_ABORT),
            Just(OPT_LIST),
            Just(OPT_STARTTLS),
            Just(OPT_INFO),
            Just(OPT_GO),
            Just(OPT_STRUCTURED_REPLY),
            any::<u32>(),
        ];
        let data = prop_oneof![
            3 => Just(Vec::new()),
            2 => Just(info_payload("", &[INFO_NAME, INFO_DESCRIPTION])),
            1 => proptest::collection::vec(any::<u8>(), 0..24),
        ];
        (code, data)
    }

    proptest! {
        /// Under `--tls=require` no option before STARTTLS reveals anything about the export
        /// (no SERVER or INFO reply, no transmission), and whatever follows STARTTLS (here
        /// random bytes instead of a TLS handshake) ends the connection without a panic.
        #[test]
        fn require_reveals_nothing_before_starttls(
            options in proptest::collection::vec(option(), 0..12),
            after in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let device = tiny_device("slc");
            let export = ExportInfo {
                name: "ssdlab".into(),
                description: "secret".into(),
                size: device.logical_bytes(),
                read_only: false,
                block_sizes: (512, device.page_size(), MAX_PAYLOAD),
            };
            let emu = Emulator::new(device, clock::by_name("virtual", None).unwrap(), None, 0);
            let mut input = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes().to_vec();
            for (code, data) in &options {
                input.extend_from_slice(&IHAVEOPT.to_be_bytes());
                input.extend_from_slice(&code.to_be_bytes());
                input.extend_from_slice(&(data.len() as u32).to_be_bytes());
                input.extend_from_slice(data);
            }
            input.extend_from_slice(&after);
            let mut io = MemoryTransport::new(input);
            let counters = serve_stream_tls(&mut io, &emu, &export, Some(tls()), |_| {});
            prop_assert_eq!(counters.requests, 0);
            let out = &io.output;
            let mut at = 18;
            while at + 20 <= out.len() {
                let option = u32::from_be_bytes(out[at + 8..at + 12].try_into().unwrap());
                let kind = u32::from_be_bytes(out[at + 12..at + 16].try_into().unwrap());
                let len = u32::from_be_bytes(out[at + 16..at + 20].try_into().unwrap()) as usize;
                prop_assert!(kind != REP_SERVER && kind != REP_INFO, "option {option}: {kind:#x}");
                if option == OPT_STARTTLS && kind == REP_ACK {
                    break; // TLS bytes follow
                }
                at += 20 + len;
            }
        }
    }
}

// -- TLS under the limits ------------------------------------------------------------------------

fn header_bytes(command: Command, cookie: u64, offset: u64, length: u32) -> [u8; 28] {
    RequestHeader {
        flags: 0,
        command,
        cookie,
        offset,
        length,
    }
    .encode()
}

/// Read `n` simple replies (each with `read_len` bytes of data when it succeeds): cookie, error,
/// data, in the order they came.
fn replies<S: Read>(s: &mut S, n: usize, read_len: usize) -> Vec<(u64, u32, Vec<u8>)> {
    (0..n)
        .map(|_| {
            let mut r = [0u8; 16];
            s.read_exact(&mut r).expect("reply");
            assert_eq!(
                u32::from_be_bytes(r[0..4].try_into().unwrap()),
                SIMPLE_REPLY_MAGIC
            );
            let error = u32::from_be_bytes(r[4..8].try_into().unwrap());
            let cookie = u64::from_be_bytes(r[8..16].try_into().unwrap());
            let mut data = vec![0u8; if error == 0 { read_len } else { 0 }];
            s.read_exact(&mut data).expect("reply data");
            (cookie, error, data)
        })
        .collect()
}

/// The limits' back-pressure works through TLS: with two requests in flight and a 1 MiB budget,
/// 4 MiB of pipelined writes and 4 MiB of pipelined reads in TLS records all get correct
/// replies; and a client that stalls in the middle of the TLS handshake (trickling a byte at a
/// time, so that no single read times out) is closed by the handshake timeout's watchdog.
#[test]
fn tls_under_small_limits_and_a_tls_handshake_that_stalls() {
    use ssdlab_nbd::connection::{ConnectionLimits, INPUT_BUFFER, MIN_BUFFERED_BYTES};
    use std::time::{Duration, Instant};
    const PIECE: usize = 128 << 10;
    const PIECES: u64 = 32;
    let dir = TempDir::new("certs-limits");
    make_certificates(&dir.0);
    for clock in ["virtual", "realtime"] {
        let server = start(&format!("tls-limits-{clock}"), clock, |o| {
            o.tls = x509_options(&dir.0, None);
            o.limits.connection = ConnectionLimits {
                max_requests_in_flight: 2,
                max_buffered_bytes: MIN_BUFFERED_BYTES,
            };
            o.limits.handshake_timeout = Duration::from_millis(500);
        });
        let mut s = connect_raw(&server.socket);
        greet(&mut s);
        starttls(&mut s);
        let mut t = x509_client(s, &dir.0.join("ca-cert.pem"));
        go(&mut t);
        let data = pattern(11, PIECE * PIECES as usize);
        // Writes, pipelined: four times the budget arrives while replies are not read.
        let mut batch = Vec::new();
        for i in 0..PIECES {
            let at = i as usize * PIECE;
            batch.extend_from_slice(&header_bytes(Command::Write, i, at as u64, PIECE as u32));
            batch.extend_from_slice(&data[at..at + PIECE]);
        }
        t.write_all(&batch).unwrap();
        let written = replies(&mut t, PIECES as usize, 0);
        let mut cookies: Vec<u64> = written.iter().map(|r| r.0).collect();
        cookies.sort_unstable();
        assert_eq!(cookies, (0..PIECES).collect::<Vec<_>>(), "{clock}: writes");
        assert!(written.iter().all(|r| r.1 == 0), "{clock}: writes");
        // Reads, pipelined: 4 MiB of replies against a 1 MiB budget.
        let mut batch = Vec::new();
        for i in 0..PIECES {
            let at = (PIECES - 1 - i) * PIECE as u64;
            batch.extend_from_slice(&header_bytes(Command::Read, i, at, PIECE as u32));
        }
        t.write_all(&batch).unwrap();
        let read = replies(&mut t, PIECES as usize, PIECE);
        assert_eq!(read.len(), PIECES as usize);
        for (cookie, error, back) in &read {
            assert_eq!(*error, 0, "{clock}: read {cookie}");
            let at = (PIECES - 1 - cookie) as usize * PIECE;
            assert!(back[..] == data[at..at + PIECE], "{clock}: read {cookie}");
        }
        t.write_all(&header_bytes(Command::Disconnect, 0, 0, 0))
            .unwrap();

        // A client that starts the TLS handshake and never finishes it: a record header that
        // announces 512 bytes of ClientHello, then a byte every 100 ms.
        let mut s = connect_raw(&server.socket);
        greet(&mut s);
        starttls(&mut s);
        let started = Instant::now();
        s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
        let closed = loop {
            std::thread::sleep(Duration::from_millis(100));
            if s.write_all(&[0x01]).is_err() {
                break started.elapsed();
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{clock}: the stalled TLS handshake is still open"
            );
        };
        assert!(
            closed >= Duration::from_millis(400) && closed < Duration::from_millis(1500),
            "{clock}: closed after {closed:?}"
        );
        let summary = server.finish();
        let emulator = &summary["emulator"];
        assert_eq!(emulator["tls"]["mode"], "require");
        assert_eq!(emulator["limits"]["max_requests_in_flight"], 2);
        assert_eq!(
            emulator["closed_by_server"]["handshake_timeouts"], 1,
            "{clock}"
        );
        assert!(
            emulator["backpressure_waits"].as_u64().unwrap() > 0,
            "{clock}: the limits held the pipelined requests back"
        );
        let peak = emulator["peak_connection_buffered_bytes"].as_u64().unwrap() as usize;
        // No request here is larger than the budget, so the budget holds (give or take the
        // input window that a request alone may fill).
        assert!(
            peak <= MIN_BUFFERED_BYTES + INPUT_BUFFER,
            "{clock}: peak {peak}"
        );
        assert_eq!(summary["jobs"][0]["write"]["total_ios"], PIECES, "{clock}");
        assert_eq!(summary["jobs"][0]["read"]["total_ios"], PIECES, "{clock}");
    }
}
