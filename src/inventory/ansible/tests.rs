//! Unit tests of the Ansible inventory readers (INI and YAML).

use super::*;

type Row = (
    String,
    Option<String>,
    Option<u16>,
    Option<String>,
    Vec<String>,
    String,
);

fn rows(specs: &[NodeSpec]) -> Vec<Row> {
    specs
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.host.clone(),
                s.port,
                s.user.clone(),
                s.groups.clone(),
                s.origin.as_ref().unwrap().to_string(),
            )
        })
        .collect()
}

const INI: &str = "\
# fleet
bastion ansible_host=192.0.2.1

[a100]
gpu[01:02] ansible_user=ops
gpu03:2222 ansible_host=10.0.0.3 rack=r2   # inline comment

[h100]
h100-[a:b] ansible_ssh_private_key_file=keys/h100

[gpu:children]
a100
h100

[gpu:vars]
ansible_user=gpu-ops
rack = \"r1\"
gpufleet_root=/host
ansible_ssh_common_args='-o ProxyJump=bastion'

[all:vars]
ansible_port=22
site=ams
";

#[test]
fn ini_hosts_groups_children_vars_and_precedence() {
    let (specs, warnings) = parse_ini(INI, Path::new("/inv/hosts")).unwrap();
    let r = rows(&specs);
    let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        r,
        vec![
            (
                "bastion".into(),
                Some("192.0.2.1".into()),
                Some(22),
                None,
                vec![],
                "/inv/hosts:2".into()
            ),
            (
                "gpu01".into(),
                None,
                Some(22),
                Some("ops".into()),
                g(&["gpu", "a100"]),
                "/inv/hosts:5".into()
            ),
            (
                "gpu02".into(),
                None,
                Some(22),
                Some("ops".into()),
                g(&["gpu", "a100"]),
                "/inv/hosts:5".into()
            ),
            (
                "gpu03".into(),
                Some("10.0.0.3".into()),
                Some(2222),
                Some("gpu-ops".into()),
                g(&["gpu", "a100"]),
                "/inv/hosts:6".into()
            ),
            (
                "h100-a".into(),
                None,
                Some(22),
                Some("gpu-ops".into()),
                g(&["gpu", "h100"]),
                "/inv/hosts:9".into()
            ),
            (
                "h100-b".into(),
                None,
                Some(22),
                Some("gpu-ops".into()),
                g(&["gpu", "h100"]),
                "/inv/hosts:9".into()
            ),
        ]
    );
    // Host vars over group vars over all:vars; non-ansible vars are labels.
    assert_eq!(specs[3].labels.get("rack").map(String::as_str), Some("r2"));
    assert_eq!(specs[1].labels.get("rack").map(String::as_str), Some("r1"));
    assert_eq!(specs[0].labels.get("site").map(String::as_str), Some("ams"));
    assert_eq!(specs[1].root.as_deref(), Some("/host"));
    assert_eq!(specs[0].root, None);
    assert_eq!(
        specs[4].identity_file.as_deref(),
        Some(Path::new("/inv/keys/h100"))
    );
    // ansible_ssh_common_args is read as ssh options (issue 22): no warning, and only the
    // group's hosts carry it.
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(specs[0].ssh_args.is_none());
    assert!(specs[1].ssh_args.as_ref().is_some_and(|c| !c.is_empty()));
}

/// Issue 22: the options are checked when the inventory is read; what ssh refuses names the
/// file, line, host and variable, other options are warned once for the first host.
#[test]
fn ssh_args_refused_and_warned_with_their_host() {
    let e = parse_ini(
        "[g]\nh1 ansible_ssh_common_args='-J a -J b'\n",
        Path::new("/inv/hosts"),
    )
    .unwrap_err()
    .0;
    assert!(
        e.starts_with("/inv/hosts:2: host `h1`: ansible_ssh_common_args: -J b: Only a single -J"),
        "{e}"
    );
    let e = parse_ini(
        "[g]\nh1 ansible_ssh_extra_args=\"-o 'x\"\n",
        Path::new("/inv/hosts"),
    )
    .unwrap_err()
    .0;
    assert!(e.contains("No closing quotation"), "{e}");
    let (_, w) = parse_ini(
        "[g]\nh1\nh2\n[g:vars]\nansible_ssh_common_args='-C -o ControlPersist=60s'\n",
        Path::new("/inv/hosts"),
    )
    .unwrap();
    assert_eq!(
        w,
        [
            "/inv/hosts:5: host `h1`: ansible_ssh_common_args: `-C` is not honoured by gpufleet; ignored",
            "/inv/hosts:5: host `h1`: ansible_ssh_common_args: `-o ControlPersist=60s` is not honoured by gpufleet; ignored",
        ]
    );
}

#[test]
fn ini_errors_name_the_line() {
    let e = |t: &str| parse_ini(t, Path::new("h")).unwrap_err().0;
    assert_eq!(
        e("[a:varz]\n"),
        "h:1: `[a:varz]`: a section is [group], [group:vars] or [group:children]; did you mean `vars`?"
    );
    assert_eq!(
        e("[a]\nx ansible_port=http\n"),
        "h:2: ansible_port `http` of host `x` is not a port (1-65535)"
    );
    assert_eq!(
        e("[a]\nx foo\n"),
        "h:2: `foo` after host \"x\": variables are key=value"
    );
    assert_eq!(e("[a]\nx k='v\n"), "h:2: \"x k='v\": a quote is not closed");
    assert!(e("[a:vars]\njust-a-word\n").starts_with("h:2: "));
    assert!(e("[a:children]\nb\n[b:children]\na\n").contains("children of each other"));
    assert!(e("[a]\ng[3:1]\n").contains("runs backwards"));
}

const YAML: &str = "\
all:
  vars:
    site: ams
  hosts:
    bastion:
      ansible_host: 192.0.2.1
  children:
    gpu:
      vars:
        ansible_user: gpu-ops
        ansible_port: 2222
      children:
        a100:
          hosts:
            gpu[01:02]:
              ansible_user: ops
            gpu03:
              ansible_host: 10.0.0.3
              ansible_port: 22
              gpufleet_canary: true
              rack: r2
    cpu:
      hosts:
        cpu1:
";

#[test]
fn yaml_hosts_groups_children_vars_and_lines() {
    let (specs, warnings) = parse_yaml(YAML, Path::new("inv.yml")).unwrap();
    assert!(warnings.is_empty());
    let r = rows(&specs);
    let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        r,
        vec![
            (
                "bastion".into(),
                Some("192.0.2.1".into()),
                None,
                None,
                vec![],
                "inv.yml:5".into()
            ),
            (
                "gpu01".into(),
                None,
                Some(2222),
                Some("ops".into()),
                g(&["gpu", "a100"]),
                "inv.yml:15".into()
            ),
            (
                "gpu02".into(),
                None,
                Some(2222),
                Some("ops".into()),
                g(&["gpu", "a100"]),
                "inv.yml:15".into()
            ),
            (
                "gpu03".into(),
                Some("10.0.0.3".into()),
                Some(22),
                Some("gpu-ops".into()),
                g(&["gpu", "a100"]),
                "inv.yml:17".into()
            ),
            (
                "cpu1".into(),
                None,
                None,
                None,
                g(&["cpu"]),
                "inv.yml:24".into()
            ),
        ]
    );
    assert!(specs[3].canary && !specs[1].canary);
    assert_eq!(specs[3].labels.get("rack").map(String::as_str), Some("r2"));
    assert_eq!(specs[4].labels.get("site").map(String::as_str), Some("ams"));
}

#[test]
fn yaml_errors_name_line_and_column() {
    let e = |t: &str| parse_yaml(t, Path::new("i.yml")).unwrap_err().0;
    assert_eq!(
        e("all:\n  hots:\n    a:\n"),
        "i.yml:2:3: group `all`: unknown key `hots` (hosts, vars, children); did you mean `hosts`?"
    );
    assert!(e("all:\n  hosts: [a, b]\n").starts_with("i.yml:2:10: `all.hosts`"));
    assert!(e("all:\n  hosts:\n    a: 1\n").starts_with("i.yml:3:8: host `a`"));
    assert!(e("all: {\n").starts_with("i.yml:"), "{}", e("all: {\n"));
    assert!(e("all:\n  hosts:\n    a:\n    a:\n").starts_with("i.yml:4:"));
    assert!(e("- a\n").starts_with("i.yml:1:1: an Ansible YAML inventory is a map"));
    // A billion-laughs document fails on saphyr's alias budget, not by exhausting memory.
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 0..12 {
        let prev = if i == 0 {
            "a".to_string()
        } else {
            format!("b{}", i - 1)
        };
        bomb.push_str(&format!("b{i}: &b{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
    }
    assert!(parse_yaml(&bomb, Path::new("b.yml")).is_err());
}

#[test]
fn ranges() {
    assert_eq!(
        expand_range("gpu[08:10]").unwrap(),
        ["gpu08", "gpu09", "gpu10"]
    );
    assert_eq!(expand_range("x[0:4:2]y").unwrap(), ["x0y", "x2y", "x4y"]);
    assert_eq!(
        expand_range("r[a:b]n[1:2]").unwrap(),
        ["ran1", "ran2", "rbn1", "rbn2"]
    );
    assert!(expand_range("g[1:9999999]").is_err());
    assert!(expand_range("g[1-3]").is_err());
    assert_eq!(
        host_pattern("fe80::1").unwrap(),
        (vec!["fe80::1".to_string()], None)
    );
    assert_eq!(
        host_pattern("g[1:2]:22").unwrap(),
        (vec!["g1".to_string(), "g2".to_string()], Some(22))
    );
}

#[test]
fn a_list_or_map_for_a_connection_variable_is_an_error() {
    let e = |t: &str| parse_yaml(t, Path::new("inv.yml")).unwrap_err().0;
    assert_eq!(
        e("all:\n  hosts:\n    gpu01:\n      ansible_host: [10.0.0.1, 10.0.0.2]\n"),
        "inv.yml:4:21: host `gpu01`: ansible_host is a list; it takes one value (`ansible_host: …`)"
    );
    assert_eq!(
        e(
            "all:\n  children:\n    gpu:\n      vars:\n        ansible_user:\n          name: ops\n      hosts:\n        a:\n"
        ),
        "inv.yml:6:11: group `gpu`: ansible_user is a map; it takes one value (`ansible_user: …`)"
    );
    // A list for a label is no label (labels are scalars), as before.
    let (specs, _) = parse_yaml(
        "all:\n  hosts:\n    a:\n      racks: [r1, r2]\n      ansible_host:\n",
        Path::new("inv.yml"),
    )
    .unwrap();
    assert!(specs[0].labels.is_empty() && specs[0].host.is_none());
}

const VAULTED: &str = "!vault |\n          $ANSIBLE_VAULT;1.1;AES256\n          62313365396662343061393464336163383764373764613633653634306231386433626436623361\n";

#[test]
fn vault_encrypted_values_are_never_used_as_text() {
    let e = |t: &str| parse_yaml(t, Path::new("inv.yml")).unwrap_err().0;
    let err = e(&format!(
        "all:\n  hosts:\n    gpu01:\n      ansible_host: {VAULTED}"
    ));
    assert_eq!(
        err,
        "inv.yml:4: host `gpu01`: ansible_host is vault-encrypted; vault-encrypted values are not supported: decrypt it (`ansible-vault decrypt`) or set it in ~/.ssh/config (HostName, Port, User, IdentityFile)"
    );
    // Through a group's vars too, named for each host it reaches.
    let err = e(&format!(
        "all:\n  vars:\n    ansible_user: {VAULTED}  hosts:\n    gpu02:\n"
    ));
    assert!(
        err.starts_with("inv.yml:3: host `gpu02`: ansible_user is vault-encrypted"),
        "{err}"
    );
    // A vaulted secret gpufleet does not use: a warning, never a label or its ciphertext.
    let (specs, w) = parse_yaml(
        &format!("all:\n  hosts:\n    gpu03:\n      db_password: {VAULTED}      ansible_become_password: {VAULTED}"),
        Path::new("inv.yml"),
    )
    .unwrap();
    assert!(specs[0].labels.is_empty(), "{:?}", specs[0].labels);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("inv.yml:4: db_password is vault-encrypted; gpufleet does not decrypt it"),
        "{w:?}"
    );
    assert!(!w.iter().any(|w| w.contains("AES256")), "{w:?}");
    // INI cannot tag, but a ciphertext pasted as a value is refused the same way.
    let err = parse_ini(
        "gpu04 ansible_ssh_private_key_file=$ANSIBLE_VAULT;1.1;AES256\n",
        Path::new("hosts"),
    )
    .unwrap_err()
    .0;
    assert!(
        err.starts_with("hosts:1: host `gpu04`: ansible_ssh_private_key_file is vault-encrypted"),
        "{err}"
    );
}

#[test]
fn an_ini_inventory_with_a_byte_order_mark_loads() {
    let (specs, _) = parse_ini(
        "\u{feff}[gpu]\ngpu01 ansible_host=10.0.0.1\n",
        Path::new("h"),
    )
    .unwrap();
    assert_eq!(specs[0].name, "gpu01");
    assert_eq!(specs[0].groups, ["gpu"]);
    assert_eq!(specs[0].host.as_deref(), Some("10.0.0.1"));
}

/// Issue 22: group_vars/ and host_vars/ beside the inventory (files and folders, YAML and
/// JSON) rank above the inventory's own variables; ansible_group_priority orders groups of
/// one depth; `[v6]:port` host lines; INI values typed as Ansible types them
/// (tests/oracle_ansible.rs checks the same against ansible-inventory).
#[test]
fn vars_folders_priority_ipv6_and_typing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("group_vars/gpu")).unwrap();
    std::fs::create_dir_all(d.join("host_vars")).unwrap();
    std::fs::write(
        d.join("group_vars/gpu/conn.yml"),
        "ansible_host: 10.7.7.1\nansible_port: 2701\n",
    )
    .unwrap();
    std::fs::write(d.join("group_vars/gpu/user"), "ansible_user: gvgpu\n").unwrap();
    std::fs::write(d.join("group_vars/gpu/notes.txt"), "ansible_user: never\n").unwrap();
    std::fs::write(
        d.join("group_vars/all.json"),
        "{\"zone\": \"z1\", \"ansible_user\": \"allu\"}",
    )
    .unwrap();
    std::fs::write(d.join("host_vars/d1.yaml"), "lbl: hv\n").unwrap();
    let ini = "[gpu]\nd1 flag=True gone=None\n[2001:db8::1]:2203\n[cpu]\nc1\nd1\n\
               [gpu:vars]\nansible_user=inline\n[cpu:vars]\nansible_group_priority=10\nansible_port=2999\n";
    let path = d.join("hosts.ini");
    let (specs, _) = parse_ini(ini, &path).unwrap();
    let get = |n: &str| specs.iter().find(|s| s.name == n).unwrap();
    let d1 = get("d1");
    assert_eq!(
        (d1.host.as_deref(), d1.port, d1.user.as_deref()),
        (Some("10.7.7.1"), Some(2701), Some("gvgpu"))
    );
    assert_eq!(d1.labels.get("zone").map(String::as_str), Some("z1"));
    assert_eq!(d1.labels.get("lbl").map(String::as_str), Some("hv"));
    assert_eq!(d1.labels.get("flag").map(String::as_str), Some("true"));
    assert!(!d1.labels.contains_key("gone"));
    let v6 = get("2001:db8::1");
    assert_eq!(v6.port, Some(2203));
    let c1 = get("c1");
    assert_eq!((c1.port, c1.user.as_deref()), (Some(2999), Some("allu")));
    // A group_vars file's bad port names that file and line.
    std::fs::write(d.join("host_vars/c1.yml"), "x: 1\nansible_port: nope\n").unwrap();
    let e = parse_ini(ini, &path).unwrap_err().to_string();
    assert!(
        e.contains("host_vars/c1.yml:2:1: host_vars/c1: ansible_port `nope`"),
        "{e}"
    );
    // ansible_group_priority must be a number; `[v6]` alone is a bad section, as in Ansible.
    let e = parse_ini("[g]\nh\n[g:vars]\nansible_group_priority=hi\n", &path)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ansible_group_priority `hi`"), "{e}");
    assert!(parse_ini("[v6]\n[2001:db8::2]\n", &path).is_err());
}

#[test]
fn a_resolving_error_names_the_file_and_line_once_then_the_variable() {
    use crate::inventory::source::{InventoryFormat, from_text};
    let path = Path::new("/inv/hosts");
    let err = |ini: &str| match from_text(path, ini, InventoryFormat::AnsibleIni, None) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted: {ini}"),
    };
    let e = err("[g]\nh1 ansible_ssh_common_args='-o ProxyJump=a%h'\n");
    assert!(
        e.starts_with("/inv/hosts:2: node `h1`: ansible_ssh_common_args: ProxyJump \"a%h\""),
        "{e}"
    );
    assert_eq!(e.matches("/inv/hosts").count(), 1, "{e}");
    // Set in [g:vars]: the variable's own line too.
    let e = err("[g]\nh1\n[g:vars]\nansible_ssh_common_args='-o ProxyJump=a%h'\n");
    assert!(
        e.starts_with("/inv/hosts:2: node `h1`: ansible_ssh_common_args (line 4): ProxyJump"),
        "{e}"
    );
}

#[test]
fn ansible_ssh_args_come_before_ansibles_own_options() {
    use crate::inventory::source::{InventoryFormat, from_text};
    let path = Path::new("/inv/hosts");
    let inv = from_text(
        path,
        "[g]\nh1 ansible_ssh_args='-o Port=2211 -l sa -J b1' ansible_port=2212 ansible_user=u ansible_ssh_common_args='-p 2213'\nh2 ansible_port=2214 ansible_ssh_common_args='-p 2215 -l x'\n",
        InventoryFormat::AnsibleIni,
        None,
    )
    .unwrap();
    let n = |name: &str| inv.nodes.iter().find(|n| n.name == name).unwrap();
    assert_eq!((n("h1").port, n("h1").user.as_str()), (2211, "sa"));
    assert_eq!(n("h1").route.jump.len(), 1, "{:?}", n("h1").route);
    // Without ansible_ssh_args, Ansible's own options win over the common args.
    assert_eq!((n("h2").port, n("h2").user.as_str()), (2214, "x"));
    // No "not used" warning for ansible_ssh_args any more.
    assert!(
        !inv.warnings.iter().any(|w| w.contains("ansible_ssh_args")),
        "{:?}",
        inv.warnings
    );
}
