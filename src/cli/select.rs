//! `-n/--node`, `-g/--group`, `-l/--label`: the node selector flags, declared once and
//! flattened into every command that selects nodes (`snapshot`, `tui`, `upgrade`, `locks`,
//! `config show` through [`super::ScanArgs`], and `inventory list`). What they mean is
//! [`crate::inventory::Selection`].

use clap::Args;

use crate::inventory::Selection;

/// The node selector flags.
#[derive(Debug, Args, Default, Clone)]
pub struct SelectArgs {
    /// Only these nodes: a node set as ClusterShell's nodeset reads it (gpu[001-008],
    /// gpu[1-15/2], 'gpu[1-8]!gpu5', with , ! & ^), globs with * and ? ('gpu0*') matched
    /// against the inventory; repeated flags add up. Brackets are always a numeric range,
    /// never a glob character class: 'sim-00[04]*' is 'sim-0004*'; for either of two prefixes
    /// give both ('sim-000*,sim-004*')
    #[arg(short, long, value_name = "NAME")]
    pub node: Vec<String>,

    /// Only nodes in this inventory group; repeatable
    #[arg(short, long, value_name = "GROUP")]
    pub group: Vec<String>,

    /// Only nodes with this label (key=value, or key); repeatable
    #[arg(short, long, value_name = "LABEL")]
    pub label: Vec<String>,
}

impl SelectArgs {
    /// The selection these flags give (none given: every node).
    pub fn selection(&self) -> Selection {
        Selection {
            nodes: self.node.clone(),
            groups: self.group.clone(),
            labels: self.label.clone(),
        }
    }

    /// One node by name (`gpufleet unlock NODE`).
    pub fn one(node: &str) -> SelectArgs {
        SelectArgs {
            node: vec![node.to_string()],
            ..SelectArgs::default()
        }
    }
}
