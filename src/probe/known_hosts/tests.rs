//! known_hosts matching, indexing and learning.

use super::*;

const K1: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF4wdbTQRPw5TP5FEldmIA7sibG8w1tsdzWupG+kpN2S";
const K2: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFvBd+t9iPNcmS+jp3f9Bq+5c9JbKO4R+HY7WNOHensG";

fn key(s: &str) -> PublicKey {
    PublicKey::from_openssh(s).unwrap()
}

fn kh(text: &str) -> KnownHosts {
    let mut k = KnownHosts::default();
    k.add_text(Path::new("kh"), text.to_string());
    k
}

#[test]
fn plain_port_wildcard_negation_and_hashed() {
    let k = kh(&format!(
        "gpu1,10.0.0.1 {K1}\n[gpu2]:2222 {K1}\n*.dc1,!bad.dc1 {K1}\n{} {K1}\nnot a line\n",
        hashed_host("[127.0.0.5]:2200", b"0123456789abcdefghij")
    ));
    assert_eq!(k.skipped, vec![(PathBuf::from("kh"), 5)]);
    let ok = |h, p| matches!(k.check(h, p, &key(K1), None), Verdict::Known { .. });
    assert!(ok("gpu1", 22));
    assert!(ok("10.0.0.1", 22));
    assert!(!ok("gpu1", 2222));
    assert!(ok("gpu2", 2222));
    assert!(ok("n7.dc1", 22));
    assert!(!ok("bad.dc1", 22));
    assert!(ok("127.0.0.5", 2200));
    assert_eq!(k.check("other", 22, &key(K1), None), Verdict::Unknown);
    // Names are matched without regard to ASCII case, indexed or not.
    assert!(ok("GPU1", 22));
    assert!(ok("N7.DC1", 22));
}

#[test]
fn indexed_and_pattern_lines_are_seen_together_in_file_order() {
    // A plain line after a wildcard line for the same host: the changed-key verdict names
    // both, in file order; each line found once though it names the host twice.
    let k = kh(&format!(
        "*.dc1 {K2}
gpu1.dc1,GPU1.dc1 {K2}
"
    ));
    assert_eq!(
        k.check("gpu1.dc1", 22, &key(K1), None),
        Verdict::Changed {
            lines: vec![(PathBuf::from("kh"), 1), (PathBuf::from("kh"), 2)]
        }
    );
}

#[test]
fn changed_key_and_any_matching_line_accepts() {
    let k = kh(&format!("gpu1 {K2}\ngpu1 {K1}\ngpu3 {K2}\n"));
    assert!(matches!(
        k.check("gpu1", 22, &key(K1), None),
        Verdict::Known { line: 2, .. }
    ));
    assert_eq!(
        k.check("gpu3", 22, &key(K1), None),
        Verdict::Changed {
            lines: vec![(PathBuf::from("kh"), 3)]
        }
    );
}

#[test]
fn revoked_wins() {
    let k = kh(&format!("gpu1 {K1}\n@revoked * {K1}\n"));
    assert!(matches!(
        k.check("gpu1", 22, &key(K1), None),
        Verdict::Revoked { line: 2, .. }
    ));
}

#[test]
fn learning_appends_and_is_found_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/known_hosts");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("# comment\nother {K2}")).unwrap();
    let mut k = KnownHosts::load(std::slice::from_ref(&path), Some(path.clone())).unwrap();
    assert_eq!(k.check("127.0.0.9", 2201, &key(K1), None), Verdict::Unknown);
    k.learn("127.0.0.9", 2201, &key(K1)).unwrap();
    assert!(matches!(
        k.check("127.0.0.9", 2201, &key(K1), None),
        Verdict::Known { .. }
    ));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.ends_with(&format!("\n[127.0.0.9]:2201 {K1}\n")),
        "{text}"
    );
    let again = KnownHosts::load(&[path], None).unwrap();
    assert!(matches!(
        again.check("127.0.0.9", 2201, &key(K1), None),
        Verdict::Known { line: 3, .. }
    ));
}

/// CA keys for these tests only (made once with `ssh-keygen -t ed25519 -N ''`), and CA's
/// public key.
const CA: &str = concat!(
    "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
    "QyNTUxOQAAACDTREmGNsqCAD6dkViTCvLCxKNFcMQ+S0H0S+jXgkT55AAAAIhiUd0kYlHd\n",
    "JAAAAAtzc2gtZWQyNTUxOQAAACDTREmGNsqCAD6dkViTCvLCxKNFcMQ+S0H0S+jXgkT55A\n",
    "AAAEB1XEwoyM4Y3gnNV6SJTOr3SUdNKU8FDNlc5MXZjOxY/NNESYY2yoIAPp2RWJMK8sLE\n",
    "o0VwxD5LQfRL6NeCRPnkAAAAAAECAwQF\n",
    "-----END OPENSSH PRIVATE KEY-----\n",
);
const CA_PUB: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINNESYY2yoIAPp2RWJMK8sLEo0VwxD5LQfRL6NeCRPnk";
const OTHER_CA: &str = concat!(
    "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
    "QyNTUxOQAAACD/SgTKrHHx+d1kEph9voWgDPhzwUT3CE9dapfau/qTOQAAAIgrfuu5K37r\n",
    "uQAAAAtzc2gtZWQyNTUxOQAAACD/SgTKrHHx+d1kEph9voWgDPhzwUT3CE9dapfau/qTOQ\n",
    "AAAEAhPQc5J0/zuMQfIZOeOZMQZfy/sJO6NM5FV0r63f1mQf9KBMqscfH53WQSmH2+haAM\n",
    "+HPBRPcIT11ql9q7+pM5AAAAAAECAwQF\n",
    "-----END OPENSSH PRIVATE KEY-----\n",
);

/// A certificate for K1 signed by `ca`, valid for `window` (Unix seconds), of `host` type,
/// with `principals` and critical options `critical`.
fn cert(
    ca: &str,
    host: bool,
    principals: &[&str],
    window: (u64, u64),
    critical: &[&str],
) -> Certificate {
    use russh::keys::ssh_key::PrivateKey;
    use russh::keys::ssh_key::certificate::{Builder, CertType};
    let ca = PrivateKey::from_openssh(ca).unwrap();
    let mut b = Builder::new([7u8; 16], key(K1).key_data().clone(), window.0, window.1).unwrap();
    b.cert_type(if host { CertType::Host } else { CertType::User })
        .unwrap();
    b.key_id("test").unwrap();
    if principals.is_empty() {
        b.all_principals_valid().unwrap();
    }
    for p in principals {
        b.valid_principal(*p).unwrap();
    }
    for c in critical {
        b.critical_option(*c, "").unwrap();
    }
    b.sign(&ca).unwrap()
}

#[test]
fn host_certificates_are_checked_against_cert_authority_lines() {
    let now = now_unix();
    let valid = (now - 60, now + 3600);
    let k = kh(&format!(
        "@cert-authority *.dc1,[127.0.0.*]:* {CA_PUB}\n@revoked bad.dc1 {CA_PUB}\nplain.dc1 {K1}\n"
    ));
    assert!(k.has_cert_authority("n1.dc1", 22));
    assert!(k.has_cert_authority("127.0.0.5", 2200));
    assert!(!k.has_cert_authority("n1.dc2", 22));
    let check = |host: &str, c: &Certificate| k.check(host, 22, &key(K1), Some(c));
    let rejected = |v: Verdict| match v {
        Verdict::CertificateRejected { line: 1, why, .. } => why,
        other => panic!("{other:?}"),
    };

    let good = cert(CA, true, &["n1.dc1", "n2.dc1"], valid, &[]);
    assert!(matches!(
        check("n2.dc1", &good),
        Verdict::Known { line: 1, .. }
    ));
    // An empty principal list is valid for any host (PROTOCOL.certkeys).
    let any = cert(CA, true, &[], valid, &[]);
    assert!(matches!(
        check("n9.dc1", &any),
        Verdict::Known { line: 1, .. }
    ));
    assert!(
        rejected(check("n3.dc1", &good))
            .contains("n3.dc1 is not among its principals (n1.dc1, n2.dc1)")
    );
    let expired = cert(CA, true, &["n1.dc1"], (1_000, 2_000), &[]);
    assert_eq!(
        rejected(check("n1.dc1", &expired)),
        "it expired at 1970-01-01T00:33:20Z"
    );
    let early = cert(CA, true, &["n1.dc1"], (now + 3600, now + 7200), &[]);
    assert!(rejected(check("n1.dc1", &early)).starts_with("it is not valid before"));
    let user = cert(CA, false, &["n1.dc1"], valid, &[]);
    assert!(rejected(check("n1.dc1", &user)).contains("user certificate"));
    let critical = cert(CA, true, &["n1.dc1"], valid, &["force-command"]);
    assert!(rejected(check("n1.dc1", &critical)).contains("critical option \"force-command\""));
    // A revoked CA is refused, whatever else vouches for the key.
    assert!(matches!(
        check("bad.dc1", &cert(CA, true, &["bad.dc1"], valid, &[])),
        Verdict::Revoked {
            line: 2,
            ca: true,
            ..
        }
    ));
    // Another CA: the key inside is looked up like a plain key (as OpenSSH does).
    let other = cert(OTHER_CA, true, &["n1.dc1"], valid, &[]);
    assert_eq!(check("n1.dc1", &other), Verdict::Unknown);
    // A rejected certificate whose key a plain line carries is accepted by that line.
    let k2 = kh(&format!("@cert-authority * {CA_PUB}\nplain.dc1 {K1}\n"));
    assert!(matches!(
        k2.check("plain.dc1", 22, &key(K1), Some(&expired)),
        Verdict::Known { line: 2, .. }
    ));
}

#[test]
fn candidates_are_found_before_and_the_check_reads_only_them() {
    let salt = |i: u32| {
        let mut s = [0u8; 20];
        s[..4].copy_from_slice(&i.to_be_bytes());
        s
    };
    let mut text = String::new();
    for i in 0..(HASHED_WARN as u32 + 1) {
        text.push_str(&format!(
            "{} {K2}\n",
            hashed_host(&format!("other{i}"), &salt(i))
        ));
    }
    text.push_str(&format!(
        "{} {K1}\ngpu7,GPU7,10.0.0.7 {K2}\ngpu* {K2}\n@revoked nothing {K2}\n",
        hashed_host("[gpu7]:2222", b"s")
    ));
    let k = kh(&text);
    assert_eq!(k.hashed_lines(), HASHED_WARN + 2);
    assert_eq!(k.one_by_one(), HASHED_WARN + 3);
    let w = k.warning().unwrap();
    assert!(
        w.contains("100002 hashed lines") && w.contains("ms of CPU"),
        "{w}"
    );
    assert!(kh(&format!("gpu1 {K1}\n")).warning().is_none());
    let n = HASHED_WARN as u32 + 1;
    // Port 2222: the hashed line (`gpu*` is matched against `[gpu7]:2222`); port 22: the
    // plain line (once, though it names gpu7 twice) and the pattern line, in file order.
    let c = k.candidates("gpu7", 2222);
    assert_eq!(c.lines, [n]);
    let c22 = k.candidates("GPU7", 22);
    assert_eq!(c22.lines, [n + 1, n + 2]);
    assert!(matches!(
        k.check_in(&c, "gpu7", &key(K1), None),
        Verdict::Known { line, .. } if line == n as usize + 1
    ));
    assert_eq!(
        k.check_in(&c22, "GPU7", &key(K1), None),
        Verdict::Changed {
            lines: vec![
                (PathBuf::from("kh"), n as usize + 2),
                (PathBuf::from("kh"), n as usize + 3)
            ]
        }
    );
    // Candidates of another host vouch for nothing here.
    assert_eq!(
        k.check_in(&k.candidates("node8.dc2", 22), "node8.dc2", &key(K1), None),
        Verdict::Unknown
    );
    assert!(k.candidates("other5", 22).lines == [5]);
}

/// The precomputed HMAC-SHA1 key state gives what the hmac crate gives, for names of every
/// length around SHA-1's block and padding boundaries (55, 56, 63, 64, 119, 120 bytes), salts
/// of 20 bytes (as `ssh-keygen -H` writes), of none, and over a block (hashed first).
#[test]
fn the_precomputed_hmac_key_state_matches_the_hmac_crate() {
    for salt_len in [0usize, 1, 20, 63, 64, 65, 200] {
        let salt: Vec<u8> = (0..salt_len).map(|i| (i * 7 + 3) as u8).collect();
        for name_len in 0..200 {
            let name: String = (0..name_len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let mut mac = Hmac::<sha1::Sha1>::new_from_slice(&salt).unwrap();
            mac.update(name.as_bytes());
            let want: [u8; 20] = mac.finalize().into_bytes().into();
            let h = Hashed::new(&salt, want, 0);
            assert!(h.matches(&name), "salt {salt_len}, name {name_len}");
            let mut other = name.clone();
            other.push('x');
            assert!(!h.matches(&other), "salt {salt_len}, name {name_len}");
        }
    }
    // 64 bytes a hashed line (an Hmac<Sha1> kept whole was larger).
    assert_eq!(std::mem::size_of::<Hashed>(), 64);
    assert!(std::mem::size_of::<Hmac<sha1::Sha1>>() > 64);
}
