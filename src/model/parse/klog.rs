//! The kernel log lines the probe keeps (NVIDIA's, the module loader's, lockdown's), joined into
//! messages and matched by the rules of docs/domain.md ("kernel log", "Why a GPU is not
//! initialized", "Broken now"). Pure: no I/O.
//!
//! A message continues on the following lines that start with whitespace (`               NVRM:
//! …`); rules match the message joined from its lines, each continuation's leading whitespace
//! and `NVRM: ` dropped. Text after a process name (`the client 'kwin' (pid 1005)`, `pid='12',
//! name=python`) is the node's user space talking and never matched.

use std::collections::BTreeMap;

/// One kernel log message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The lines as printed (timestamps kept), for evidence.
    pub lines: Vec<String>,
    /// The text rules match: timestamp dropped, continuations joined, user-space text cut.
    pub text: String,
}

/// Drops a leading `[   12.345678] ` or dmesg -T's `[Tue Sep  8 17:16:02 2026] `.
fn strip_timestamp(line: &str) -> &str {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix('[')
        && let Some(i) = rest.find(']')
    {
        return rest[i + 1..].trim_start();
    }
    t
}

/// Cuts the text where a process name (user space's words) begins.
fn cut_user_space(text: &str) -> &str {
    let mut end = text.len();
    if let Some(i) = text.find("pid=") {
        end = end.min(i);
    }
    if let Some(i) = text.find("(pid ") {
        // `'name' (pid N)`: cut at the quote that opens the name.
        let before = text[..i].trim_end();
        let cut = match before.strip_suffix('\'') {
            Some(b) => b.rfind('\'').unwrap_or(i),
            None => i,
        };
        end = end.min(cut);
    }
    &text[..end]
}

/// Splits kept log lines into messages.
pub fn messages(log: &str) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    let mut joined: Vec<String> = Vec::new();
    for line in log.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let is_continuation = line.starts_with(char::is_whitespace) && !out.is_empty();
        if is_continuation {
            let part = line.trim_start();
            let part = part.strip_prefix("NVRM: ").unwrap_or(part);
            if let (Some(m), Some(j)) = (out.last_mut(), joined.last_mut()) {
                m.lines.push(line.to_string());
                j.push(' ');
                j.push_str(part);
            }
            continue;
        }
        out.push(Message {
            lines: vec![line.to_string()],
            text: String::new(),
        });
        joined.push(strip_timestamp(line).to_string());
    }
    for (m, j) in out.iter_mut().zip(joined) {
        m.text = cut_user_space(&j).to_string();
    }
    out
}

/// An Xid event: `NVRM: Xid (PCI:<bus id>): <code>,` (anchored at the message start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xid {
    pub bus: String,
    pub code: u32,
}

/// The Xid of a message, when it is one.
pub fn xid(m: &Message) -> Option<Xid> {
    let rest = m.text.strip_prefix("NVRM: Xid (PCI:")?;
    let (bus, rest) = rest.split_once("): ")?;
    // A MIG-attributed line names the GPU instance after the bus: `(PCI:0000:01:00 GPU-I:05)`.
    let bus = match bus.split_once(' ') {
        Some((b, inst)) if inst.starts_with("GPU-I:") => b,
        _ => bus,
    };
    let (code, _) = rest.split_once(',')?;
    let code = code.trim().parse().ok()?;
    (!bus.is_empty()
        && bus.len() <= 16
        && bus
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.'))
    .then(|| Xid {
        bus: bus.to_ascii_lowercase(),
        code,
    })
}

/// What an Xid line says of itself (docs/domain.md "Xid recovery actions"): Xid 94/95's
/// `RST: Yes|No, D-RST: Yes|No` (a reset, a drain-and-reset needed) and NVLink lines marked
/// `Nonfatal`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XidHints {
    /// `RST: Yes` (`Some(true)`), `RST: No`, or not said.
    pub rst: Option<bool>,
    /// `D-RST: Yes`, `D-RST: No`, or not said.
    pub d_rst: Option<bool>,
    /// The driver's own words mark it nonfatal (`Nonfatal`, `nonfatal`).
    pub nonfatal: bool,
}

/// The hints of an Xid message. `RST:` / `D-RST:` are the last words the driver prints, after
/// the process name (user space's words), so they are taken from the end of the raw line: the
/// last `D-RST: ` and the last `RST: ` before it. `Nonfatal` is looked for in the matchable text
/// (which ends before a process name).
pub fn xid_hints(m: &Message) -> XidHints {
    let raw = m.lines.join(" ");
    let word = |s: &str| -> Option<bool> {
        let w: String = s.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        match w.as_str() {
            "Yes" => Some(true),
            "No" => Some(false),
            _ => None,
        }
    };
    let (mut rst, mut d_rst) = (None, None);
    let mut head = raw.as_str();
    if let Some(i) = raw.rfind("D-RST: ") {
        d_rst = word(&raw[i + 7..]);
        head = &raw[..i];
    }
    if let Some(i) = head.rfind("RST: ")
        && (i == 0 || !head[..i].ends_with('-'))
    {
        rst = word(&head[i + 5..]);
    }
    let nonfatal = m
        .text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("nonfatal"));
    XidHints {
        rst,
        d_rst,
        nonfatal,
    }
}

/// An Xid 154 line's new recovery action, by name: `GPU recovery action changed from 0x0
/// (None) to 0x2 (Node Reboot Required)` gives `Node Reboot Required`. The number is not used
/// (it differs between driver and NVML versions: `0x1 (GPU Reset Required)` and `0x1 (PF FLR)`).
pub fn recovery_action(m: &Message) -> Option<String> {
    let x = xid(m)?;
    if x.code != 154 {
        return None;
    }
    let (_, to) = m.text.split_once(" to 0x")?;
    let open = to.find('(')?;
    let close = to.rfind(')')?;
    (close > open)
        .then(|| to[open + 1..close].trim().to_string())
        .filter(|n| !n.is_empty() && n.len() <= 64)
}

/// Counts per Xid code among `msgs`.
pub fn xid_counts(msgs: &[Message]) -> BTreeMap<u32, u32> {
    let mut m = BTreeMap::new();
    for x in msgs.iter().filter_map(xid) {
        *m.entry(x.code).or_insert(0u32) += 1;
    }
    m
}

/// Messages whose matchable text contains `needle`.
pub fn find<'a>(msgs: &'a [Message], needle: &str) -> Vec<&'a Message> {
    msgs.iter().filter(|m| m.text.contains(needle)).collect()
}

/// Messages that begin with `prefix` (after the timestamp) and contain `needle`. A kernel line
/// that starts with a process name (`comm[pid]: segfault … in <file>`) carries user space's
/// words; a comm is at most 15 bytes, so a driver prefix longer than that cannot be forged by one.
pub fn find_from<'a>(msgs: &'a [Message], prefix: &str, needle: &str) -> Vec<&'a Message> {
    msgs.iter()
        .filter(|m| m.text.starts_with(prefix) && m.text[prefix.len()..].contains(needle))
        .collect()
}

/// The driver's own "fallen off the bus" messages: `NVRM: GPU <bus>: GPU has fallen off the bus.`
/// and `NVRM: The NVIDIA GPU <bus> … has fallen off the bus …` (a process name cannot start
/// them), or Xid 79.
pub fn fallen_off_bus(m: &Message) -> bool {
    if xid(m).is_some_and(|x| x.code == 79) {
        return true;
    }
    if let Some(rest) = m.text.strip_prefix("NVRM: GPU ")
        && let Some((bus, tail)) = rest.split_once(": ")
    {
        return is_bus(bus) && tail.starts_with("GPU has fallen off the bus");
    }
    if let Some(rest) = m.text.strip_prefix("NVRM: The NVIDIA GPU ") {
        let bus = rest.split_whitespace().next().unwrap_or("");
        return is_bus(bus) && rest.contains("has fallen off the bus");
    }
    false
}

fn is_bus(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 3
        && s.len() <= 16
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
}

/// The PCI address a "fallen off the bus" message names (`0000:9b:00.0`), when it names one.
pub fn fallen_bus(m: &Message) -> Option<String> {
    if let Some(x) = xid(m) {
        return Some(x.bus);
    }
    m.text
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .find(|w| {
            let parts: Vec<&str> = w.split(':').collect();
            parts.len() == 3 && w.contains('.') && w.len() <= 16
        })
        .map(|w| w.trim_end_matches(':').to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const H800: &str = r#"[    8.233918] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.148.08  Release Build
[406312.552881] NVRM: Xid (PCI:0000:9b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[406312.560114] NVRM: The NVIDIA GPU 0000:9b:00.0
               NVRM: (PCI ID: 10de:2324) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[406312.553102] NVRM: Xid (PCI:0000:9b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)
"#;

    #[test]
    fn continuations_join_and_xids_are_anchored() {
        let m = messages(H800);
        assert_eq!(m.len(), 4);
        assert_eq!(m[2].lines.len(), 3);
        assert!(
            m[2].text
                .contains("installed in this system has fallen off the bus"),
            "{}",
            m[2].text
        );
        assert_eq!(find(&m, "has fallen off the bus").len(), 1);
        assert_eq!(fallen_bus(&m[2]).as_deref(), Some("0000:9b:00.0"));
        assert_eq!(
            xid(&m[1]),
            Some(Xid {
                bus: "0000:9b:00".into(),
                code: 79
            })
        );
        let counts = xid_counts(&m);
        assert_eq!(counts.get(&79), Some(&1));
        assert_eq!(counts.get(&154), Some(&1));
    }

    #[test]
    fn user_space_text_is_never_matched() {
        let log = "[ 1.0] NVRM: GPU at 0000:01:00.0: the client 'has fallen off the bus' (pid 1005) did x\n\
[ 2.0] NVRM: Xid (PCI:0000:01:00): 13, pid='77', name=has fallen off the bus, Graphics Exception\n\
[ 3.0] NVRM: something, pid=5 name=RmFetchGspRmImages: No firmware image found\n";
        let m = messages(log);
        assert!(find(&m, "has fallen off the bus").is_empty(), "{m:#?}");
        // A process named after the driver's words, dying: its line starts with its name.
        let seg = messages(
            "[9.0] nvidia GPU 0000[10178]: segfault at 0 ip 0 sp 0 error 4 in nvidia GPU 0000:00:06.0 has fallen off the bus[400000+1000]\n[9.1] NVRM: GPU 0000[1]: segfault at 0 in has fallen off the bus\n",
        );
        assert!(!seg.iter().any(fallen_off_bus), "{seg:#?}");
        assert!(messages(H800).iter().any(fallen_off_bus));
        assert!(find(&m, "No firmware image found").is_empty());
        assert_eq!(xid(&m[1]).map(|x| x.code), Some(13));
        // A line that only mentions an Xid is not one.
        assert_eq!(
            xid(&messages("[1.0] hello NVRM: Xid (PCI:0000:01:00): 79, x\n")[0]),
            None
        );
    }

    #[test]
    fn xid_hints_and_recovery_actions() {
        // The driver's own format (open-gpu-kernel-modules, the contained-error log comment).
        let m = messages(
            "[1.0] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No\n\
[2.0] NVRM: Xid (PCI:0000:01:00): 94, pid=7062, name=RST: Yes, Contained: SM (0x1). RST: No, D-RST: Yes\n\
[3.0] NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008)\n\
[4.0] NVRM: Xid (PCI:0000:0d:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)\n\
[5.0] NVRM: Xid (PCI:0000:9b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)\n",
        );
        assert_eq!(xid(&m[0]).map(|x| x.bus), Some("0000:01:00".into()));
        let h = xid_hints(&m[0]);
        assert_eq!(
            (h.rst, h.d_rst, h.nonfatal),
            (Some(false), Some(false), false)
        );
        let h = xid_hints(&m[1]);
        // The process name (user space) says `RST: Yes`; the driver's last words decide.
        assert_eq!((h.rst, h.d_rst), (Some(false), Some(true)));
        assert!(xid_hints(&m[2]).nonfatal);
        assert_eq!(xid_hints(&m[2]).rst, None);
        assert_eq!(recovery_action(&m[3]).as_deref(), Some("PF FLR"));
        assert_eq!(
            recovery_action(&m[4]).as_deref(),
            Some("Node Reboot Required")
        );
        assert_eq!(recovery_action(&m[2]), None);
    }

    #[test]
    fn dmesg_t_timestamps_and_garbage() {
        let m = messages(
            "[Tue Sep  8 17:16:02 2026] NVRM: RmFetchGspRmImages: No firmware image found\n",
        );
        assert_eq!(
            m[0].text,
            "NVRM: RmFetchGspRmImages: No firmware image found"
        );
        // A continuation with nothing before it stands alone; control bytes do not panic.
        assert_eq!(messages("   orphan continuation\n\u{0}\u{ff}\n").len(), 2);
    }
}
