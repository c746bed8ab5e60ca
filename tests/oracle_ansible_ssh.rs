//! `ansible_ssh_common_args` / `ansible_ssh_extra_args` against the real tools: Ansible itself
//! (`ansible all -m raw`, ansible-core 2.19 pinned in scripts/test.sh) builds each host's ssh
//! command line, with `ANSIBLE_SSH_EXECUTABLE` a script that writes its argv down and fails;
//! OpenSSH's `ssh -G -F none` then reads that very argv. For every host both must give the
//! same address (`hostname`), port, user, identity files (in order), jump hosts and
//! ProxyCommand (its `%` tokens expanded), or both refuse. `gpufleet inventory list -f json
//! --ssh-config none` is the other side.
//!
//! `GPUFLEET_ORACLE_GPUFLEET=PATH` runs another gpufleet binary on the same cases (how the
//! agreement before this reader was measured).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// One host each: its INI host-line variables (`@K` is a folder holding key files k0, k1, k2).
const HOSTS: &[&str] = &[
    "ansible_ssh_common_args='-J bastion'",
    "ansible_ssh_common_args='-J ops@bastion:2222,b2'",
    "ansible_ssh_common_args='-o ProxyJump=ops@bastion'",
    "ansible_ssh_common_args='-o ProxyCommand=\"ssh -W %h:%p -q ops@bastion\"'",
    "ansible_ssh_common_args='-o ProxyCommand=\"ssh -W %h:%p -q ops@bastion\"' ansible_port=2201 ansible_user=u5",
    "ansible_ssh_extra_args='-p 2202'",
    "ansible_ssh_extra_args='-p 2202' ansible_port=2203",
    "ansible_ssh_common_args='-l ops'",
    "ansible_ssh_common_args='-l ops' ansible_user=root2",
    "ansible_ssh_common_args='-o User=ops -o Port=2204'",
    "ansible_ssh_common_args='-o Port=2205' ansible_ssh_extra_args='-p 2206'",
    "ansible_ssh_common_args='-i @K/k1'",
    "ansible_ssh_common_args='-i @K/k1 -o IdentityFile=@K/k2' ansible_ssh_private_key_file=@K/k0",
    "ansible_ssh_common_args='-i @K/missing'",
    "ansible_ssh_common_args='-o HostName=real15.example'",
    "ansible_host=10.9.0.16 ansible_ssh_common_args='-o HostName=other16'",
    "ansible_ssh_common_args='-J b17' ansible_ssh_extra_args='-o ProxyCommand=\"nc %h %p\"'",
    "ansible_ssh_common_args='-o ProxyJump=none'",
    "ansible_ssh_common_args='-o ProxyCommand=none'",
    "ansible_ssh_common_args='-C -o ControlMaster=auto -o ControlPersist=60s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'",
    "ansible_ssh_common_args='-4 -oPort=2207 -lops2'",
    "ansible_ssh_common_args='-o \"ProxyCommand ssh -W %h:%p b22\"'",
    "ansible_ssh_common_args='-o ProxyJump=\"ops@[2001:db8::7]:2222\"'",
    "ansible_ssh_common_args=\"-o 'ProxyCommand=ssh -W %h:%p -i @K/k1 bastion'\"",
    "ansible_ssh_common_args='-o Port=2208' ansible_host=10.9.0.25",
    "ansible_ssh_common_args='-J b26' ansible_host=10.9.0.26 ansible_port=2209 ansible_user=u26",
    "ansible_ssh_extra_args='-o ProxyJump=b27,c27:2200'",
    "ansible_ssh_common_args='-o Hostname=%h.example'",
    "ansible_ssh_common_args=''",
    "ansible_ssh_common_args='-o ProxyCommand=\"ssh -W %h:%p %r@bastion\"' ansible_user=u30",
    "ansible_ssh_common_args='-o IdentityFile=@K/k1 -o IdentitiesOnly=yes -J b31'",
    "ansible_ssh_common_args='-p2210' ansible_ssh_extra_args='-J b32:2022'",
    "ansible_ssh_private_key_file=~/kk ansible_ssh_common_args='-i @K/k1 -i @K/k1'",
    // ansible_ssh_args comes before Ansible's own -o Port=/IdentityFile=/User= (ssh.py
    // `_build_command`): its values win.
    "ansible_ssh_args='-o Port=2211' ansible_port=2212",
    "ansible_ssh_args='-l sa35' ansible_user=u35",
    "ansible_ssh_args='-i @K/k1' ansible_ssh_private_key_file=@K/k0 ansible_ssh_common_args='-i @K/k2'",
    "ansible_ssh_args='-J b37'",
    "ansible_ssh_args='-C -o ControlMaster=auto -o ControlPersist=60s'",
    "ansible_ssh_args='-p 2213' ansible_ssh_extra_args='-p 2214' ansible_port=2215",
    "ansible_ssh_args='-o User=sa40 -o HostName=real40.example' ansible_host=10.9.0.40 ansible_user=u40",
    "ansible_ssh_args='' ansible_port=2216 ansible_user=u41",
];

/// Group and YAML cases: `[g:vars]` (two hosts) and a YAML inventory.
const GROUP_INI: &str =
    "[gv]\ngv1\ngv2 ansible_port=2301\n[gv:vars]\nansible_ssh_common_args='-J gbastion -l gops'\n";
const YAML: &str = "all:\n  hosts:\n    y1:\n      ansible_ssh_common_args: -o ProxyCommand=\"ssh -W %h:%p yb\"\n    y2:\n      ansible_ssh_extra_args: \"-p 2302\"\n    y3:\n      ansible_ssh_extra_args: -p 2303 -l y3u\n";

/// Both refuse these (ssh stops before connecting; gpufleet names the host and variable).
const REFUSED: &[&str] = &[
    "ansible_ssh_common_args='-J a -J b'",
    "ansible_ssh_common_args='-o ProxyCommand=\"nc %h %p\" -J b'",
    "ansible_ssh_common_args='-p 0'",
    "ansible_ssh_common_args='-o Host=x'",
    "ansible_ssh_common_args='-Z'",
    "ansible_ssh_common_args=\"-o 'x\"",
    "ansible_ssh_common_args='-o Port=abc'",
    "ansible_ssh_extra_args='-p'",
    "ansible_ssh_args='-o ProxyCommand=\"nc %h %p\"' ansible_ssh_common_args='-J b'",
    "ansible_ssh_args='-p x'",
];

/// Where gpufleet differs on purpose (docs/ssh.md "Command-line options"): (variables, what
/// gpufleet says, whether it refuses the inventory or warns).
const DEVIATIONS: &[(&str, &str, bool)] = &[
    // ssh takes a stray word as the host (and the real host as a command): refused.
    (
        "ansible_ssh_common_args='bastion'",
        "is not an option",
        true,
    ),
    // -F replaces ssh's config; gpufleet reads --ssh-config's and says so.
    (
        "ansible_ssh_common_args='-F @K/other'",
        "--ssh-config @K/other",
        false,
    ),
];

/// A host as one reader resolves it.
type Resolved = BTreeMap<&'static str, String>;

fn inventory(lines: &[String]) -> String {
    format!("[g]\n{}\n", lines.join("\n"))
}

/// Runs `ansible all -m raw` on `inv` with the recording ssh: each host's argv (without the
/// program), by the address it was given last on the line before the command.
fn ansible_argvs(ansible: &Path, inv: &Path, root: &Path) -> BTreeMap<String, Vec<String>> {
    let out = root.join("argv");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let fake = root.join("record-ssh");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nf=$(mktemp {}/a.XXXXXX)\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done > \"$f\"\nexit 255\n",
            out.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let st = Command::new(ansible)
        .args(["all", "-m", "raw", "-a", "true", "-f", "4", "-i"])
        .arg(inv)
        .env("ANSIBLE_SSH_EXECUTABLE", &fake)
        .env("ANSIBLE_INVENTORY_UNPARSED_FAILED", "true")
        .env("HOME", root)
        .env("ANSIBLE_HOME", root.join(".ansible-home"))
        .env("ANSIBLE_LOCAL_TEMP", root.join(".ansible-tmp"))
        .output()
        .unwrap();
    let mut argvs = BTreeMap::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        let mut argv: Vec<String> = String::from_utf8(bytes)
            .unwrap()
            .split_terminator('\0')
            .map(str::to_string)
            .collect();
        argv.pop(); // the command
        let host = argv.last().unwrap().clone();
        argvs.insert(host, argv);
    }
    assert!(
        st.status.code() != Some(0) || argvs.is_empty(),
        "ansible connected through a failing ssh?"
    );
    argvs
}

/// `ssh -G -F none ARGV`: the resolved host, or ssh's refusal.
fn ssh_g(argv: &[String], user: &str) -> Result<Resolved, String> {
    let out = Command::new("ssh")
        .args(["-G", "-F", "none"])
        .args(argv)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let mut keys = Vec::new();
    let mut one = BTreeMap::new();
    for l in text.lines() {
        let (k, v) = l.split_once(' ').unwrap_or((l, ""));
        if k == "identityfile" {
            keys.push(v.to_string());
        } else {
            one.insert(k.to_string(), v.to_string());
        }
    }
    // ssh's defaults when no key was given; gpufleet lists none then.
    if keys.iter().all(|k| k.starts_with("~/.ssh/id_")) {
        keys.clear();
    }
    let mut r = Resolved::new();
    let host = one["hostname"].clone();
    let (port, ruser) = (one["port"].clone(), one["user"].clone());
    r.insert("host", host.clone());
    r.insert("port", port.clone());
    r.insert("user", ruser.clone());
    r.insert("keys", keys.join(","));
    let jump = one.get("proxyjump").map_or(String::new(), |j| {
        j.split(',')
            .map(|hop| {
                let (u, rest) = hop.rsplit_once('@').map_or((user, hop), |(u, r)| (u, r));
                let (h, p) = if let Some(r) = rest.strip_prefix('[') {
                    let (h, p) = r.split_once(']').unwrap();
                    (h, p.strip_prefix(':').unwrap_or("22"))
                } else {
                    rest.split_once(':').unwrap_or((rest, "22"))
                };
                let target = if h.contains(':') {
                    format!("[{h}]:{p}")
                } else {
                    format!("{h}:{p}")
                };
                format!("{u}@{target}")
            })
            .collect::<Vec<_>>()
            .join(",")
    });
    r.insert("jump", jump);
    // ssh -G prints ProxyCommand as written; ssh expands these tokens when it runs it.
    let original = argv.last().unwrap();
    let command = one
        .get("proxycommand")
        .filter(|c| *c != "none")
        .map_or(String::new(), |c| {
            c.replace("%%", "\u{0}")
                .replace("%h", &host)
                .replace("%p", &port)
                .replace("%r", &ruser)
                .replace("%n", original)
                .replace('\u{0}', "%")
        });
    r.insert("proxy_command", command);
    Ok(r)
}

fn gpufleet_bin() -> PathBuf {
    std::env::var_os("GPUFLEET_ORACLE_GPUFLEET")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gpufleet")))
}

/// gpufleet's resolution of every host of `inv` by address, or its refusal; and its stderr.
fn gpufleet(inv: &Path, home: &Path) -> (Result<BTreeMap<String, Resolved>, String>, String) {
    let out = Command::new(gpufleet_bin())
        .args([
            "inventory",
            "list",
            "-f",
            "json",
            "--ssh-config",
            "none",
            "-i",
        ])
        .arg(inv)
        .env("HOME", home)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return (Err(stderr.clone()), stderr);
    }
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    };
    let list = |v: &Value| {
        v.as_array()
            .map(|a| a.iter().map(text).collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    };
    let mut hosts = BTreeMap::new();
    for n in doc.as_array().unwrap() {
        let mut r = Resolved::new();
        r.insert("host", text(&n["host"]));
        r.insert("port", text(&n["port"]));
        r.insert("user", text(&n["user"]));
        r.insert("keys", list(&n["identity_files"]));
        r.insert("jump", list(&n["jump"]));
        r.insert("proxy_command", text(&n["proxy_command"]));
        hosts.insert(text(&n["name"]), r);
    }
    (Ok(hosts), stderr)
}

/// The address Ansible gives ssh for host `name` with `vars`.
fn address(name: &str, vars: &str) -> String {
    vars.split_whitespace()
        .find_map(|w| w.strip_prefix("ansible_host="))
        .unwrap_or(name)
        .to_string()
}

#[test]
fn ssh_args_agree_with_ansible_and_ssh() {
    let Some(inventory_bin) = support::need_pip("ansible-inventory", "ansible-core==2.19.14")
    else {
        return;
    };
    let ansible = inventory_bin.with_file_name("ansible");
    support::need("ssh");
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let keys = root.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    for k in ["k0", "k1", "k2"] {
        std::fs::write(keys.join(k), "not read\n").unwrap();
    }
    std::fs::write(keys.join("other"), "Host *\n  Port 2299\n").unwrap();
    let k = |s: &str| s.replace("@K", &keys.display().to_string());
    let mut differ = Vec::new();
    let mut agree = 0;
    let mut total = 0;

    // The hosts that resolve: one INI inventory, a group one and a YAML one.
    let lines: Vec<String> = HOSTS
        .iter()
        .enumerate()
        .map(|(i, v)| format!("h{} {}", i + 1, k(v)))
        .collect();
    let mut names: BTreeMap<String, String> = HOSTS
        .iter()
        .enumerate()
        .map(|(i, v)| (address(&format!("h{}", i + 1), v), format!("h{}", i + 1)))
        .collect();
    for h in ["gv1", "gv2", "y1", "y2", "y3"] {
        names.insert(h.into(), h.into());
    }
    let invs = [
        ("hosts.ini", inventory(&lines)),
        ("group.ini", GROUP_INI.to_string()),
        ("hosts.yml", YAML.to_string()),
    ];
    let mut warnings = String::new();
    for (file, text) in invs {
        let dir = root.join(file.replace('.', "-"));
        std::fs::create_dir_all(&dir).unwrap();
        let inv = dir.join(file);
        std::fs::write(&inv, text).unwrap();
        let argvs = ansible_argvs(&ansible, &inv, root);
        let (mine, stderr) = gpufleet(&inv, root);
        warnings.push_str(&stderr);
        let mine = match mine {
            Ok(m) => m,
            Err(e) => {
                total += argvs.len();
                differ.push(format!("{file}: gpufleet refuses it: {e}"));
                continue;
            }
        };
        assert!(!argvs.is_empty(), "{file}: ansible ran no ssh");
        for (addr, argv) in &argvs {
            total += 1;
            let name = &names[addr];
            let theirs = ssh_g(argv, &user);
            match (&theirs, mine.get(name)) {
                (Ok(t), Some(m)) if t == m => agree += 1,
                (t, m) => differ.push(format!(
                    "{file} {name}: {argv:?}\n  ssh -G   {t:?}\n  gpufleet {m:?}"
                )),
            }
        }
    }
    for w in ["`-C`", "`-o ControlPersist=60s`", "`-4`", "identity file"] {
        if !warnings.contains(w) {
            differ.push(format!("no warning naming {w}:\n{warnings}"));
        }
    }

    // The ones both refuse: each its own inventory.
    for (i, v) in REFUSED.iter().enumerate() {
        total += 1;
        let dir = root.join(format!("r{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let inv = dir.join("hosts.ini");
        std::fs::write(&inv, inventory(&[format!("r{i} {}", k(v))])).unwrap();
        let argvs = ansible_argvs(&ansible, &inv, root);
        let theirs = argvs.values().next().map(|a| ssh_g(a, &user));
        let refused = !matches!(theirs, Some(Ok(_)));
        match gpufleet(&inv, root).0 {
            Err(e) if refused && e.contains(&format!("host `r{i}`")) => agree += 1,
            mine => differ.push(format!(
                "refused {i} ({v}): ssh -G {theirs:?}\n  gpufleet {mine:?}"
            )),
        }
    }

    for (i, (v, says, refuses)) in DEVIATIONS.iter().enumerate() {
        let dir = root.join(format!("d{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let inv = dir.join("hosts.ini");
        std::fs::write(&inv, inventory(&[format!("d{i} {}", k(v))])).unwrap();
        let argvs = ansible_argvs(&ansible, &inv, root);
        let theirs = ssh_g(argvs.values().next().unwrap(), &user);
        assert!(
            theirs.is_ok(),
            "deviation {i}: ssh refuses it now: {theirs:?}"
        );
        let (mine, stderr) = gpufleet(&inv, root);
        let ok = match mine {
            Err(e) => *refuses && e.contains(&k(says)),
            Ok(m) => {
                !*refuses
                    && stderr.contains(&k(says))
                    && Some(&theirs.unwrap()) != m.get(&format!("d{i}"))
            }
        };
        if !ok {
            differ.push(format!(
                "deviation {i} ({v}): gpufleet does not say {says:?}: {stderr}"
            ));
        }
    }
    eprintln!(
        "ansible ssh args oracle: {total} hosts, {agree} agree, {} deliberate deviations",
        DEVIATIONS.len()
    );
    assert!(
        differ.is_empty(),
        "{} of {total} differ from ansible + ssh -G:\n{}",
        differ.len(),
        differ.join("\n")
    );
}
