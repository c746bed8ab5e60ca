//! The Xid action table (data/xid-actions.tsv, from NVIDIA's Xid catalog: docs/domain.md "Xid
//! recovery actions"), compiled in, and the action an Xid 154 line names. Pure: no I/O.

/// What gpufleet does with an Xid code (the table's last column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// The catalog's immediate action is a GPU reset.
    Reset,
    /// The node must be rebooted (or the VM restarted).
    Reboot,
    /// Decided by the line: Xid 94's `RST:` / `D-RST:`, Xid 144–150 by the Xid 154 line after it.
    PerLine,
    /// Xid 154: the action the line names.
    Xid154,
    /// Stays `xid-events` (RESTART_APP, IGNORE, …).
    Events,
    /// Xid 79: `gpu-fallen-off-bus`.
    Fallen,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub xid: u32,
    pub mnemonic: &'static str,
    /// The catalog's "Resolution Bucket (Immediate Action)".
    pub immediate_action: &'static str,
    pub handling: Handling,
}

const TABLE: &str = include_str!("../../../data/xid-actions.tsv");

/// The row of `xid`, when the table has one (an Xid that is not there stays `xid-events`).
pub fn row(xid: u32) -> Option<Row> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .filter_map(|l| {
            let mut c = l.split('\t');
            let (x, m, a, g) = (c.next()?, c.next()?, c.next()?, c.next()?);
            let handling = match g.trim() {
                "reset" => Handling::Reset,
                "reboot" => Handling::Reboot,
                "per-line" => Handling::PerLine,
                "xid154" => Handling::Xid154,
                "fallen" => Handling::Fallen,
                _ => Handling::Events,
            };
            Some(Row {
                xid: x.trim().parse().ok()?,
                mnemonic: m,
                immediate_action: a,
                handling,
            })
        })
        .find(|r| r.xid == xid)
}

/// A recovery action, as gpufleet says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing to do (`None`).
    None,
    GpuReset,
    NodeReboot,
    Drain,
    DrainAndReset,
    /// A name the driver printed that is none of the above: said as printed.
    Other(String),
}

impl Action {
    /// Words for messages and JSON: `gpu-reset`, `node-reboot`, `drain`, `drain-and-reset`,
    /// `none`, or the name as printed.
    pub fn as_str(&self) -> &str {
        match self {
            Action::None => "none",
            Action::GpuReset => "gpu-reset",
            Action::NodeReboot => "node-reboot",
            Action::Drain => "drain",
            Action::DrainAndReset => "drain-and-reset",
            Action::Other(s) => s,
        }
    }

    /// How strong it is, to keep the strongest per GPU: reboot > drain and reset > reset >
    /// drain > other > none.
    pub fn rank(&self) -> u8 {
        match self {
            Action::NodeReboot => 5,
            Action::DrainAndReset => 4,
            Action::GpuReset => 3,
            Action::Drain => 2,
            Action::Other(_) => 1,
            Action::None => 0,
        }
    }
}

/// The action an Xid 154 name stands for, matched by name (docs/domain.md): `Reboot` → node
/// reboot; `Drain` with `Reset` → drain and reset; `Drain` → drain; `Reset` or `FLR` (a PCI
/// function-level reset) → GPU reset; `None` → nothing; anything else as printed.
pub fn action_of_name(name: &str) -> Action {
    let n = name.to_ascii_lowercase();
    let has = |w: &str| {
        n.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|x| x == w)
    };
    if has("reboot") {
        Action::NodeReboot
    } else if has("drain") && has("reset") {
        Action::DrainAndReset
    } else if has("drain") {
        Action::Drain
    } else if has("reset") || has("flr") {
        Action::GpuReset
    } else if n.trim() == "none" {
        Action::None
    } else {
        Action::Other(name.to_string())
    }
}

/// One GPU's Xid code in the kernel log, with the action it calls for (`kernel_log.xids[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidEntry {
    /// The bus id as the line prints it (`0000:66:00`).
    pub bus: String,
    pub code: u32,
    pub count: u32,
    /// The strongest action its lines call for; `None`: it stays `xid-events`.
    pub action: Option<Action>,
    /// Why that action (`catalog RESET_GPU`, `RST: Yes`, `Xid 154: Node Reboot Required`), or why
    /// none (`nonfatal`, `RST: No`, `action unknown: …`).
    pub why: String,
    /// The line's own hints: `RST: Yes`, `D-RST: No`, `Nonfatal`.
    pub hints: Vec<String>,
    /// The first message's lines (evidence).
    pub first_lines: Vec<String>,
}

/// Per GPU and Xid code, in the log's order of first appearance, at most 256: the action each
/// calls for, by the table (docs/domain.md "Xid recovery actions"). Xid 79 is
/// `gpu-fallen-off-bus`'s and gets none here. An NVLink 5 Xid (144–150) is decided by an Xid 154
/// line for the same GPU; without one (and not `Nonfatal`), its action is unknown.
pub fn assess(msgs: &[super::klog::Message]) -> Vec<XidEntry> {
    use super::klog::{recovery_action, xid, xid_hints};
    let mut out: Vec<XidEntry> = Vec::new();
    for m in msgs {
        let Some(x) = xid(m) else { continue };
        let h = xid_hints(m);
        let mut hints = Vec::new();
        if let Some(r) = h.rst {
            hints.push(format!("RST: {}", if r { "Yes" } else { "No" }));
        }
        if let Some(r) = h.d_rst {
            hints.push(format!("D-RST: {}", if r { "Yes" } else { "No" }));
        }
        if h.nonfatal {
            hints.push("Nonfatal".to_string());
        }
        let r = row(x.code);
        let (action, why) = match r.map(|r| r.handling) {
            _ if h.nonfatal => (None, "nonfatal".to_string()),
            Some(Handling::Reset) => (
                Some(Action::GpuReset),
                format!("catalog {}", r.map_or("", |r| r.immediate_action)),
            ),
            Some(Handling::Reboot) => (
                Some(Action::NodeReboot),
                format!("catalog {}", r.map_or("", |r| r.immediate_action)),
            ),
            Some(Handling::Xid154) => match recovery_action(m) {
                Some(name) => match action_of_name(&name) {
                    Action::None => (None, "Xid 154: None".to_string()),
                    a => (Some(a), format!("Xid 154: {name}")),
                },
                None => (None, "action unknown: an Xid 154 line without its action".into()),
            },
            Some(Handling::PerLine) if x.code == 94 || x.code == 95 => {
                if h.d_rst == Some(true) {
                    (Some(Action::DrainAndReset), "D-RST: Yes".to_string())
                } else if h.rst == Some(true) {
                    (Some(Action::GpuReset), "RST: Yes".to_string())
                } else if x.code == 95 {
                    (Some(Action::GpuReset), "catalog RESET_GPU".to_string())
                } else {
                    (None, "catalog RESTART_APP (no RST: Yes)".to_string())
                }
            }
            Some(Handling::PerLine) => (
                None,
                "action unknown: decided by the catalog's sub-code table or an Xid 154 line, and the log has neither".to_string(),
            ),
            _ => (None, String::new()),
        };
        if x.code == 79 {
            continue;
        }
        let bus = x.bus.clone();
        let full = out.len() >= 256;
        match out.iter_mut().find(|e| e.bus == bus && e.code == x.code) {
            Some(e) => {
                e.count = e.count.saturating_add(1);
                if action.as_ref().map_or(0, Action::rank)
                    > e.action.as_ref().map_or(0, Action::rank)
                    || (e.action.is_none() && action.is_some())
                {
                    e.action = action;
                    e.why = why;
                }
                for hint in hints {
                    if !e.hints.contains(&hint) {
                        e.hints.push(hint);
                    }
                }
            }
            None if !full => out.push(XidEntry {
                bus,
                code: x.code,
                count: 1,
                action,
                why,
                hints,
                first_lines: m.lines.iter().take(4).cloned().collect(),
            }),
            None => {}
        }
    }
    // An NVLink 5 Xid whose GPU has an Xid 154 action: that action is its recovery.
    let by154: Vec<(String, Action)> = out
        .iter()
        .filter(|e| e.code == 154)
        .filter_map(|e| e.action.clone().map(|a| (e.bus.clone(), a)))
        .collect();
    for e in out.iter_mut() {
        if (144..=150).contains(&e.code)
            && e.action.is_none()
            && e.why.starts_with("action unknown")
            && let Some((_, a)) = by154.iter().find(|(b, _)| *b == e.bus)
        {
            e.action = Some(a.clone());
            e.why = "by the GPU's Xid 154 line".to_string();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_compiles_in() {
        assert_eq!(row(46).map(|r| r.handling), Some(Handling::Reset));
        assert_eq!(row(94).map(|r| r.handling), Some(Handling::PerLine));
        assert_eq!(
            row(145).map(|r| r.immediate_action),
            Some("WORKFLOW_NVLINK5_ERR")
        );
        assert_eq!(row(13).map(|r| r.handling), Some(Handling::Events));
        assert_eq!(row(79).map(|r| r.handling), Some(Handling::Fallen));
        assert_eq!(row(151).map(|r| r.handling), Some(Handling::Reboot));
        assert_eq!(row(9999), None);
    }

    #[test]
    fn assess_a_log() {
        use crate::model::parse::klog::messages;
        let log = "[1.0] NVRM: Xid (PCI:0000:66:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 11 (0x0409a0c2 0x00000008)\n\
[1.1] NVRM: Xid (PCI:0000:66:00): 145, RLW_RXPIPE Fatal XC0 i0 Link 12 (0x0409a0c2 0x00000008)\n\
[1.2] NVRM: Xid (PCI:0000:66:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)\n\
[2.0] NVRM: Xid (PCI:0000:76:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 3 (0x0409a0c2 0x00000008)\n\
[2.1] NVRM: Xid (PCI:0000:86:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6)\n\
[3.0] NVRM: Xid (PCI:0000:65:00): 94, pid=1, name=x, Contained: SM (0x1). RST: No, D-RST: No\n\
[3.1] NVRM: Xid (PCI:0000:64:00): 94, pid=1, name=x, Contained: SM (0x1). RST: Yes, D-RST: No\n\
[4.0] NVRM: Xid (PCI:0000:9b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n\
[5.0] NVRM: Xid (PCI:0000:1a:00): 13, pid=5, name=python3, Graphics Exception\n\
[5.1] NVRM: Xid (PCI:0000:1a:00): 48, pid=5, name=python3, DBE (double bit error)\n";
        let e = assess(&messages(log));
        let get = |bus: &str, code: u32| e.iter().find(|x| x.bus == bus && x.code == code).unwrap();
        let a = get("0000:66:00", 145);
        assert_eq!((a.count, a.action.clone()), (2, Some(Action::NodeReboot)));
        assert_eq!(get("0000:66:00", 154).action, Some(Action::NodeReboot));
        assert_eq!(get("0000:76:00", 145).action, None);
        assert!(get("0000:86:00", 149).why.starts_with("action unknown"));
        assert_eq!(get("0000:65:00", 94).action, None);
        assert_eq!(get("0000:64:00", 94).action, Some(Action::GpuReset));
        assert_eq!(get("0000:1a:00", 13).action, None);
        assert_eq!(get("0000:1a:00", 48).action, Some(Action::GpuReset));
        assert!(e.iter().all(|x| x.code != 79));
    }

    #[test]
    fn xid154_names() {
        // Names seen in public logs and in the catalog's Xid 154 values.
        assert_eq!(action_of_name("Node Reboot Required"), Action::NodeReboot);
        assert_eq!(action_of_name("OS Reboot"), Action::NodeReboot);
        assert_eq!(action_of_name("GPU Reset Required"), Action::GpuReset);
        assert_eq!(action_of_name("PF FLR"), Action::GpuReset);
        assert_eq!(action_of_name("Drain P2P"), Action::Drain);
        assert_eq!(action_of_name("Drain and Reset"), Action::DrainAndReset);
        assert_eq!(action_of_name("None"), Action::None);
        assert_eq!(
            action_of_name("Recover IMEX Domain"),
            Action::Other("Recover IMEX Domain".into())
        );
    }
}
